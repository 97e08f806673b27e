package llm

import (
	"strings"
	"testing"
)

func TestEstimateMessagesTokens(t *testing.T) {
	for _, c := range []struct {
		name, body string
		bytes      int // the text counted; the estimate is EstimateTokens of it
	}{
		{"strings", `{"model":"m","system":"Be brief.","messages":[{"role":"user","content":"Say hello"}]}`, len("Be brief.") + len("Say hello")},
		{"text blocks", `{"system":[{"type":"text","text":"abc","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"hello"},{"type":"text","text":"world"}]}]}`, 3 + 5 + 5},
		{"the JSON syntax does not count", `{ "messages" : [ { "role" : "user" , "content" : "x" } ] , "max_tokens" : 100000 }`, 1},
		{"a tool call and its result", `{"messages":[
			{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"tool_use","id":"toolu_1","name":"get","input":{ "city" : "Paris" }}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
				{"type":"tool_result","tool_use_id":"toolu_2","content":"rain"}]}]}`,
			len("hmm") + len("get") + len(`{"city":"Paris"}`) + len("sunny") + len("rain")},
		{"documents and images", `{"messages":[{"role":"user","content":[
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain text"}},
			{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"}},
			{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},
			{"type":"redacted_thinking","data":"opaque"}]}]}`, len("plain text")},
		{"tools", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"get","description":"Gets it.","input_schema":{"type": "object"}}],"tool_choice":{"type":"auto"}}`,
			2 + len("get") + len("Gets it.") + len(`{"type":"object"}`)},
		{"a malformed part is skipped, the rest counts", `{"system":5,"messages":[{"role":"user","content":{"not":"a list"}},{"role":"user","content":"four"}],"tools":"none"}`, 4},
		{"not JSON", `{"messages":`, 0},
		{"not an object", `["hello"]`, 0},
		{"no text", `{"messages":[{"role":"user","content":""}]}`, 0},
	} {
		if got, want := EstimateMessagesTokens([]byte(c.body)), EstimateTokens(c.bytes); got != want {
			t.Errorf("%s: %d tokens, want %d (%d bytes)", c.name, got, want, c.bytes)
		}
	}
	// Four bytes a token, at least one for any text.
	long := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 4001) + `"}]}`
	if got := EstimateMessagesTokens([]byte(long)); got != 1001 {
		t.Errorf("4001 bytes of text: %d tokens, want 1001", got)
	}
}
