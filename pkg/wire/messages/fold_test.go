package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// TestFoldedKeys: an object FromHub decodes into a struct with two
// keys that differ only in case is refused (which one counts would depend
// on their order, which the Idempotency-Key fingerprint does not see); the
// objects passed on as they are (a tool's parameters, here a schema with
// properties "id" and "ID") are not looked into.
func TestFoldedKeys(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		refused    bool
	}{
		{"top level", `{"model":"m","messages":[{"role":"user","content":"hi"}],"Messages":[]}`, true},
		{"message", `{"model":"m","messages":[{"role":"user","content":"a","Content":"b"}]}`, true},
		{"content part", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","TEXT":"b"}]}]}`, true},
		{"tool call function", `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}","ARGUMENTS":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`, true},
		{"tool", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","Name":"g"}}]}`, true},
		{"tool choice", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","TYPE":"x","function":{"name":"f"}}}`, true},
		{"schema properties", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"id":{"type":"string"},"ID":{"type":"string"}}}}}]}`, false},
		{"one key in another case", `{"model":"m","messages":[{"role":"user","Content":"hi"}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fromHubBody(&llm.UpstreamRequest{Model: "claude-x", Body: []byte(tc.body)})
			var pe *llm.ProviderError
			refused := errors.As(err, &pe) && pe.Class == llm.FailRejected && strings.Contains(pe.Message, "differ only in case")
			if refused != tc.refused {
				t.Errorf("refused %v (%v), want %v", refused, err, tc.refused)
			}
		})
	}
}
