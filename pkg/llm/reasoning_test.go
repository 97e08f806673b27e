package llm

import "testing"

// TestReasoningDeltaIsOutput: a reasoning model's thinking, streamed as
// delta.reasoning_content (vLLM, DeepSeek, Together) or delta.reasoning
// (Groq, OpenRouter), is output with its text counted; null, an empty
// string or something other than a string is neither, and is no error.
func TestReasoningDeltaIsOutput(t *testing.T) {
	for _, tc := range []struct {
		delta  string
		output bool
		text   string
	}{
		{`{"role":"assistant","content":null,"reasoning_content":"Let me think."}`, true, "Let me think."},
		{`{"reasoning":"hmm"}`, true, "hmm"},
		{`{"reasoning":"a\n\u00e9"}`, true, "a\né"},
		{`{"reasoning_content":null,"reasoning":""}`, false, ""},
		{`{"reasoning":{"summary":"odd"}}`, false, ""},
	} {
		c, err := ParseChunk([]byte(`{"id":"c","choices":[{"index":0,"delta":` + tc.delta + `,"finish_reason":null}]}`))
		if err != nil || c.Output != tc.output || c.Text != tc.text {
			t.Errorf("delta %s: Output %v Text %q (%v), want %v %q", tc.delta, c.Output, c.Text, err, tc.output, tc.text)
		}
	}
}
