package systemtest_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// agentCall replays a recorded agent request against the gateway at url,
// with the model m and stream as given.
func agentCall(t *testing.T, url, fixture string, stream bool) (agentFixture, answer) {
	t.Helper()
	f := loadFixture(t, fixture)
	body := withTop(t, f.Body, map[string]string{"model": `"m"`, "stream": fmt.Sprint(stream)})
	hdr := []string{}
	if strings.HasPrefix(fixture, "claude") {
		hdr = append(hdr, "x-api-key", testKey, "Authorization", "")
	}
	for k, v := range f.Headers {
		hdr = append(hdr, k, v)
	}
	return f, callPath(t, url+"/api"+f.Path, string(body), hdr...)
}

// droppedNames splits x-gateway-dropped.
func droppedNames(a answer) []string {
	var out []string
	for _, n := range strings.Split(a.header.Get("X-Gateway-Dropped"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// TestClaudeCodeOnOpenAIRoute replays Claude Code's recorded turns against
// an OpenAI route: the request is translated (the system blocks and the
// system message inside messages, max_tokens, thinking and effort, the
// tools, the user id), the hints it drops are named, and the agent gets a
// Messages answer with the upstream's tool call.
func TestClaudeCodeOnOpenAIRoute(t *testing.T) {
	for _, turn := range []string{"claude-code-2.1.328-turn1.json", "claude-code-2.1.328-turn2.json"} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", turn, stream), func(t *testing.T) {
				url, oai, claude := pairGateway(t, "openai")
				oai.Script(providertest.Response{ToolCall: &providertest.ToolCall{ID: "call_1", Name: "Bash", Arguments: `{"command":"echo hi"}`},
					FinishReason: "tool_calls"})
				f, a := agentCall(t, url, turn, stream)
				if a.status != 200 {
					t.Fatalf("status %d: %s", a.status, a.body)
				}
				if oai.Calls() != 1 || claude.Calls() != 0 {
					t.Fatalf("upstream calls: openai %d, anthropic %d; want 1, 0", oai.Calls(), claude.Calls())
				}
				up := oai.Requests()[0].JSON
				if up["max_completion_tokens"] != float64(32000) || up["reasoning_effort"] != "high" || up["max_tokens"] != nil {
					t.Errorf("upstream max_completion_tokens %v, reasoning_effort %v, max_tokens %v; want 32000, high, none",
						up["max_completion_tokens"], up["reasoning_effort"], up["max_tokens"])
				}
				if _, ok := up["user"].(string); !ok {
					t.Errorf("metadata.user_id did not reach the upstream as user")
				}
				for _, k := range []string{"thinking", "output_config", "context_management", "metadata", "system"} {
					if _, ok := up[k]; ok {
						t.Errorf("upstream got the Messages field %q", k)
					}
				}
				msgs, _ := up["messages"].([]any)
				var roles []string
				for _, m := range msgs {
					roles = append(roles, m.(map[string]any)["role"].(string))
				}
				wantRoles := []string{"system", "user", "system"}
				if strings.Contains(turn, "turn2") {
					wantRoles = append(wantRoles, "assistant", "tool")
				}
				if !slices.Equal(roles, wantRoles) {
					t.Errorf("upstream roles %v, want %v", roles, wantRoles)
				}
				var src struct {
					System []struct{ Text string }
					Tools  []json.RawMessage
				}
				if err := json.Unmarshal(f.Body, &src); err != nil {
					t.Fatal(err)
				}
				var sys []string
				for _, b := range src.System {
					sys = append(sys, b.Text)
				}
				if got := msgs[0].(map[string]any)["content"]; got != strings.Join(sys, "\n\n") {
					t.Errorf("system message %q, want the blocks joined by a blank line", got)
				}
				if tools, _ := up["tools"].([]any); len(tools) != len(src.Tools) {
					t.Errorf("upstream got %d tools, want %d", len(tools), len(src.Tools))
				}
				want := []string{"context_management", "cache_control", "tools[].defer_loading"}
				if strings.Contains(turn, "turn2") {
					want = append(want, "messages[].content[thinking]")
				}
				got := droppedNames(a)
				for _, w := range want {
					if !slices.Contains(got, w) {
						t.Errorf("x-gateway-dropped %q does not name %s", a.header.Get("X-Gateway-Dropped"), w)
					}
				}
				if strings.Contains(string(oai.Requests()[0].Body), "cache_control") || strings.Contains(string(oai.Requests()[0].Body), "signature") {
					t.Errorf("upstream body carries a dropped hint: %.300s", oai.Requests()[0].Body)
				}
				checkAgentToolAnswer(t, "messages", stream, a)
			})
		}
	}
}

// TestCodexOnOtherRoutes replays Codex's recorded turns against an OpenAI
// Chat Completions route and an Anthropic route: the request is translated
// (developer messages, reasoning effort, function and namespace tools, the
// function call and its output), the hints it drops are named, and Codex
// gets a Responses answer with the upstream's tool call.
func TestCodexOnOtherRoutes(t *testing.T) {
	for _, first := range []string{"openai", "anthropic"} {
		for _, turn := range []string{"codex-0.169.0-turn1.json", "codex-0.169.0-turn2.json"} {
			for _, stream := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", first, turn, stream), func(t *testing.T) {
					url, up1, up2 := pairGateway(t, first)
					up1.Script(providertest.Response{ToolCall: &providertest.ToolCall{ID: "call_1", Name: "exec_command", Arguments: `{"cmd":"echo hi"}`},
						FinishReason: "tool_calls"})
					f, a := agentCall(t, url, turn, stream)
					if a.status != 200 {
						t.Fatalf("status %d: %s", a.status, a.body)
					}
					if up1.Calls() != 1 || up2.Calls() != 0 {
						t.Fatalf("upstream calls: %d, %d; want 1, 0", up1.Calls(), up2.Calls())
					}
					var src struct {
						Tools []struct {
							Type  string
							Tools []json.RawMessage
						}
					}
					if err := json.Unmarshal(f.Body, &src); err != nil {
						t.Fatal(err)
					}
					functions := 0
					for _, tl := range src.Tools {
						switch tl.Type {
						case "function":
							functions++
						case "namespace":
							functions += len(tl.Tools)
						}
					}
					up := up1.Requests()[0].JSON
					tools, _ := up["tools"].([]any)
					if len(tools) != functions {
						t.Errorf("upstream got %d tools, want %d (the function tools, namespaces flattened)", len(tools), functions)
					}
					body := string(up1.Requests()[0].Body)
					for _, leak := range []string{"encrypted_content", "client_metadata", "prompt_cache_key", "web_search", "gAAAAB"} {
						if strings.Contains(body, leak) {
							t.Errorf("upstream body carries %q", leak)
						}
					}
					if first == "anthropic" {
						if _, ok := up["system"].(string); !ok {
							t.Errorf("anthropic upstream got no system prompt from the developer messages")
						}
					} else {
						msgs, _ := up["messages"].([]any)
						if len(msgs) == 0 || msgs[0].(map[string]any)["role"] != "system" {
							t.Errorf("openai upstream's first message is not the developer message as system")
						}
					}
					want := []string{"include", "prompt_cache_key", "client_metadata", "reasoning.summary", "tools[namespace]", "tools[web_search]"}
					if strings.Contains(turn, "turn2") {
						want = append(want, "input[reasoning]")
					}
					got := droppedNames(a)
					for _, w := range want {
						if !slices.Contains(got, w) {
							t.Errorf("x-gateway-dropped %q does not name %s", a.header.Get("X-Gateway-Dropped"), w)
						}
					}
					checkAgentToolAnswer(t, "responses", stream, a)
				})
			}
		}
	}
}

// checkAgentToolAnswer: the answer carries the upstream's tool call, in
// the client API's shape, and ends as a tool call.
func checkAgentToolAnswer(t *testing.T, api string, stream bool, a answer) {
	t.Helper()
	if stream {
		for _, want := range map[string][]string{
			"messages":  {`"type":"tool_use"`, `"stop_reason":"tool_use"`, "event: message_stop"},
			"responses": {`"type":"function_call"`, "event: response.completed"},
		}[api] {
			if !strings.Contains(a.body, want) {
				t.Errorf("stream lacks %s:\n%s", want, a.body)
			}
		}
		return
	}
	switch api {
	case "messages":
		var m pairMessage
		if err := json.Unmarshal([]byte(a.body), &m); err != nil {
			t.Fatal(err)
		}
		last := m.Content[len(m.Content)-1]
		if m.StopReason != "tool_use" || last.Type != "tool_use" || last.Name != "Bash" || string(last.Input) != `{"command":"echo hi"}` {
			t.Errorf("message = %s", a.body)
		}
	case "responses":
		var r pairResponse
		if err := json.Unmarshal([]byte(a.body), &r); err != nil {
			t.Fatal(err)
		}
		last := r.Output[len(r.Output)-1]
		if r.Status != "completed" || last.Type != "function_call" || last.Name != "exec_command" {
			t.Errorf("response = %s", a.body)
		}
	}
}
