package messages

import (
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// TestEstimateFigures pins the estimate's figures on whole bodies, the
// recorded agents' included: a change to how the estimate reads a body
// must give the same numbers.
func TestEstimateFigures(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"empty object", `{}`, 0},
		{"a string prompt", `{"model":"m","max_tokens":16,"system":"Be brief.","messages":[{"role":"user","content":"Say hello"}]}`, 5},
		{"escapes count as the bytes they decode to", `{"messages":[{"role":"user","content":"\u00e9\u00e9\n\"x\""}]}`, 2},
		{"member names are matched as encoding/json matches them", `{"SYSTEM":"abcdefgh","Messages":[{"role":"user","CONTENT":"abcd"}]}`, 3},
		{"the last of a repeated member counts", `{"system":"abcdefghijkl","system":"ab"}`, 1},
		{"null parts", `{"system":null,"messages":[{"role":"user","content":null},null],"tools":null}`, 0},
		{"nested tool results", `{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"tool_result","content":"abcdefgh"},{"type":"text","text":"abcd"}]}]}]}`, 3},
		{"a server tool call", `{"messages":[{"role":"assistant","content":[{"type":"server_tool_use","name":"web_search","input":{ "query" : "weather" }},{"type":"web_search_tool_result","content":[{"type":"web_search_result","title":"t"}]}]}]}`, 8},
		{"a tool schema as compact JSON", `{"tools":[{"name":"bash","description":"Runs a command.","input_schema":{ "type" : "object" , "properties" : { "command" : { "type" : "string" } } }},{"type":"web_search_20250305","name":"web_search"}]}`, 23},
		{"a malformed block is skipped", `{"messages":[{"role":"user","content":[{"type":"text","text":5},"abc",{"type":"text","text":"abcdefgh"}]}]}`, 2},
		{"not JSON", `{"messages":`, 0},
		{"not an object", `"hello"`, 0},
	} {
		if got := EstimateInputTokens([]byte(c.body)); got != c.want {
			t.Errorf("%s: %d tokens, want %d", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		prefix string
		want   []int
	}{
		{"claude-code", []int{929, 950}},
		// A Responses body is not a Messages one: only its tools' names,
		// descriptions and schemas are read.
		{"codex", []int{36, 36}},
	} {
		bodies := reqtest.AgentBodies(t, c.prefix)
		if len(bodies) != len(c.want) {
			t.Fatalf("%d recorded %s requests, want %d", len(bodies), c.prefix, len(c.want))
		}
		for i, b := range bodies {
			if got := EstimateInputTokens(b); got != c.want[i] {
				t.Errorf("recorded %s request %d: %d tokens, want %d", c.prefix, i+1, got, c.want[i])
			}
		}
	}
}

func TestEstimateInputTokens(t *testing.T) {
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
		if got, want := EstimateInputTokens([]byte(c.body)), llm.EstimateTokens(c.bytes); got != want {
			t.Errorf("%s: %d tokens, want %d (%d bytes)", c.name, got, want, c.bytes)
		}
	}
	// Four bytes a token, at least one for any text.
	long := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 4001) + `"}]}`
	if got := EstimateInputTokens([]byte(long)); got != 1001 {
		t.Errorf("4001 bytes of text: %d tokens, want 1001", got)
	}
}
