package llm

import "testing"

// TestReasoningDeltaIsOutput: a reasoning model's thinking, streamed as
// delta.reasoning_content (vLLM, DeepSeek, Together) or delta.reasoning
// (Groq, OpenRouter), is output with its text counted; null, an empty
// string or something other than a string is neither, and is no error.
func TestReasoningDeltaIsOutput(t *testing.T) {
	for _, tc := range []struct {
		delta   string
		output  bool
		textLen int
	}{
		{`{"role":"assistant","content":null,"reasoning_content":"Let me think."}`, true, 13},
		{`{"reasoning":"hmm"}`, true, 3},
		{`{"reasoning_content":null,"reasoning":""}`, false, 0},
		{`{"reasoning":{"summary":"odd"}}`, false, 0},
	} {
		c, err := ParseChunk([]byte(`{"id":"c","choices":[{"index":0,"delta":` + tc.delta + `,"finish_reason":null}]}`))
		if err != nil || c.Output != tc.output || c.TextLen != tc.textLen {
			t.Errorf("delta %s: Output %v TextLen %d (%v), want %v %d", tc.delta, c.Output, c.TextLen, err, tc.output, tc.textLen)
		}
	}
}
