package systemtest_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// bedrockClaude is the model of the Claude route of a pairGateway on
// Bedrock.
const bedrockClaude = "us.anthropic.claude-x-v1:0"

// pairGateway is a gateway whose model "m" routes first to a fake of the
// protocol first ("openai", "anthropic", or "bedrock": Claude on Bedrock),
// then to a fake of the other one (Claude on Anthropic's API after
// "openai").
func pairGateway(t *testing.T, first string) (url string, up1, up2 *providertest.Server) {
	t.Helper()
	claude, p1 := providertest.NewAnthropic(t), providertest.New(t)
	claudeProvider := fmt.Sprintf(`{name: claude, api: anthropic, base_url: %q, api_key_env: CLAUDE_KEY}`, claude.URL())
	claudeRoute := `{provider: claude, model: claude-x, input_price: 1, output_price: 2}`
	if first == "bedrock" {
		claude = providertest.NewBedrock(t)
		claudeProvider = fmt.Sprintf(`{name: claude, api: bedrock, aws_region: %s, base_url: %q}`, providertest.BedrockRegion, claude.URL())
		claudeRoute = `{provider: claude, model: "` + bedrockClaude + `", input_price: 1, output_price: 2}`
	}
	openaiRoute := `{provider: p1, model: up-1, input_price: 1, output_price: 2}`
	routes := [2]string{openaiRoute, claudeRoute}
	up1, up2 = p1, claude
	if first != "openai" {
		routes = [2]string{claudeRoute, openaiRoute}
		up1, up2 = claude, p1
	}
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - %s
  - {name: p1, api: openai, base_url: %q}
models:
  - id: m
    routes:
      - %s
      - %s
projects:
  - id: proj
    keys: [{key: %s}]
`, claudeProvider, p1.URL(), routes[0], routes[1], testKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Getenv: func(k string) string {
		if k == "CLAUDE_KEY" {
			return "claude-secret"
		}
		return ""
	}, Logger: slog.New(slog.DiscardHandler), AWSCredentials: bedrockCredentials})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, up1, up2
}

// bedrockCredentials sign a gateway's calls to a fake Bedrock.
var bedrockCredentials = credentials.NewStaticCredentialsProvider(providertest.BedrockAccessKeyID, providertest.BedrockSecretAccessKey, "")

// pairAPI is one client API of the gateway.
type pairAPI struct {
	name string
	call func(t *testing.T, url string, stream, tools bool) answer
	// terminal is what a text stream ends with.
	terminal string
}

var pairAPIs = []pairAPI{
	{"chat", func(t *testing.T, url string, stream, tools bool) answer {
		extra := []string{}
		if stream {
			extra = append(extra, `"stream":true`)
		}
		if tools {
			extra = append(extra, `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`)
		}
		return callPath(t, url+"/api/v1/chat/completions", chatBody(strings.Join(extra, ",")))
	}, "data: [DONE]"},
	{"messages", func(t *testing.T, url string, stream, tools bool) answer {
		b := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Say hello"}]`
		if stream {
			b += `,"stream":true`
		}
		if tools {
			b += `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`
		}
		return callPath(t, url+"/api/v1/messages", b+"}",
			"Authorization", "", "X-Api-Key", testKey, "Anthropic-Version", "2023-06-01")
	}, "event: message_stop"},
	{"responses", func(t *testing.T, url string, stream, tools bool) answer {
		b := `{"model":"m","input":"Say hello"`
		if stream {
			b += `,"stream":true`
		}
		if tools {
			b += `,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]`
		}
		return callPath(t, url+"/api/v1/responses", b+"}")
	}, "event: response.completed"},
}

// Minimal views of the three answer shapes.
type (
	pairChat struct {
		Choices []struct {
			Message struct {
				Content   *string
				Refusal   *string
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct{ Cost float64 }
	}
	pairMessage struct {
		Type    string
		Content []struct {
			Type, Text, Name string
			Input            json.RawMessage
		}
		StopReason string `json:"stop_reason"`
		Usage      struct{ Cost float64 }
	}
	pairResponse struct {
		Status            string
		IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
		Output            []struct {
			Type, Name, Arguments string
			Content               []struct{ Type, Text, Refusal string }
		}
		Usage struct{ Cost float64 }
	}
	pairError struct {
		Type  string
		Error struct{ Code, Message string }
	}
)

const pairToolArgs = `{"city":"Paris"}`

// checkText asserts a "Hello world" answer in the API's shape, with a cost.
func checkText(t *testing.T, api string, a answer) {
	t.Helper()
	ok := false
	switch api {
	case "chat":
		c := decodeJSONString[pairChat](t, a.body)
		ok = len(c.Choices) == 1 && c.Choices[0].Message.Content != nil && *c.Choices[0].Message.Content == "Hello world" &&
			c.Choices[0].FinishReason == "stop" && c.Usage.Cost > 0
	case "messages":
		m := decodeJSONString[pairMessage](t, a.body)
		ok = m.Type == "message" && len(m.Content) == 1 && m.Content[0].Type == "text" && m.Content[0].Text == "Hello world" &&
			m.StopReason == "end_turn" && m.Usage.Cost > 0
	case "responses":
		r := decodeJSONString[pairResponse](t, a.body)
		ok = r.Status == "completed" && len(r.Output) == 1 && len(r.Output[0].Content) == 1 &&
			r.Output[0].Content[0].Type == "output_text" && r.Output[0].Content[0].Text == "Hello world" && r.Usage.Cost > 0
	}
	if !ok {
		t.Errorf("text answer: %s", a.body)
	}
}

func checkTool(t *testing.T, api string, a answer) {
	t.Helper()
	ok := false
	switch api {
	case "chat":
		c := decodeJSONString[pairChat](t, a.body)
		ok = len(c.Choices) == 1 && len(c.Choices[0].Message.ToolCalls) == 1 &&
			c.Choices[0].Message.ToolCalls[0].Function.Name == "get_weather" &&
			c.Choices[0].Message.ToolCalls[0].Function.Arguments == pairToolArgs && c.Choices[0].FinishReason == "tool_calls" &&
			c.Usage.Cost > 0
	case "messages":
		m := decodeJSONString[pairMessage](t, a.body)
		for _, b := range m.Content {
			if b.Type == "tool_use" && b.Name == "get_weather" && string(b.Input) == pairToolArgs {
				ok = true
			}
		}
		ok = ok && m.StopReason == "tool_use" && m.Usage.Cost > 0
	case "responses":
		r := decodeJSONString[pairResponse](t, a.body)
		for _, o := range r.Output {
			if o.Type == "function_call" && o.Name == "get_weather" && o.Arguments == pairToolArgs {
				ok = true
			}
		}
		ok = ok && r.Status == "completed" && r.Usage.Cost > 0
	}
	if !ok {
		t.Errorf("tool call: %s", a.body)
	}
}

// checkError asserts the API's error envelope with code.
func checkError(t *testing.T, api string, a answer, status int, code string) {
	t.Helper()
	e := decodeJSONString[pairError](t, a.body)
	wantType := ""
	if api == "messages" {
		wantType = "error"
	}
	if a.status != status || e.Error.Code != code || e.Type != wantType || e.Error.Message == "" {
		t.Errorf("want %d %s: %d %s", status, code, a.status, a.body)
	}
}

const pairRefusal = "I can't help with that."

// checkRefusal asserts a refusal passed through, as it comes in each pair.
// An OpenAI upstream sends message.refusal with finish_reason "stop"; an
// Anthropic one a text block with stop_reason "refusal", which the gateway
// decodes as content (not a refusal) with finish_reason "content_filter".
// So: chat gets refusal+stop from OpenAI, content+content_filter from
// Anthropic; messages gets a text block + stop_reason "refusal" from both;
// responses gets a completed refusal part from OpenAI, an incomplete
// (content_filter) output_text from Anthropic.
func checkRefusal(t *testing.T, api, proto string, a answer) {
	t.Helper()
	ok := false
	switch api {
	case "chat":
		c := decodeJSONString[pairChat](t, a.body)
		if len(c.Choices) == 1 {
			m, fr := c.Choices[0].Message, c.Choices[0].FinishReason
			if proto == "openai" {
				ok = m.Refusal != nil && *m.Refusal == pairRefusal && m.Content != nil && *m.Content == "" && fr == "stop"
			} else {
				ok = m.Refusal == nil && m.Content != nil && *m.Content == pairRefusal && fr == "content_filter"
			}
		}
		ok = ok && c.Usage.Cost > 0
	case "messages":
		m := decodeJSONString[pairMessage](t, a.body)
		ok = len(m.Content) == 1 && m.Content[0].Type == "text" && m.Content[0].Text == pairRefusal &&
			m.StopReason == "refusal" && m.Usage.Cost > 0
	case "responses":
		r := decodeJSONString[pairResponse](t, a.body)
		if len(r.Output) == 1 && len(r.Output[0].Content) == 1 {
			p := r.Output[0].Content[0]
			if proto == "openai" {
				ok = r.Status == "completed" && r.IncompleteDetails == nil && p.Type == "refusal" && p.Refusal == pairRefusal
			} else {
				ok = r.Status == "incomplete" && r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter" &&
					p.Type == "output_text" && p.Text == pairRefusal
			}
		}
		ok = ok && r.Usage.Cost > 0
	}
	if !ok {
		t.Errorf("refusal from %s: %s", proto, a.body)
	}
}

// TestPairs: each client API (chat, messages, responses) against each
// upstream protocol first (openai, anthropic, the other one second): a text
// answer, a tool call, a refusal (not retried), a 5xx falling back, a 400
// rejected, every route failing, and a streamed text answer's terminal
// marker.
func TestPairs(t *testing.T) {
	type pairCase struct {
		name   string
		script func(proto string) []providertest.Response // queued on the first route's upstream
		second []providertest.Response                    // queued on the second route's upstream
		stream bool
		tools  bool
		// want
		status   int
		provider int // 1 or 2: which upstream answered; 0: none
		calls    [2]int
		check    func(t *testing.T, api, proto string, a answer)
	}
	text := func(t *testing.T, api, proto string, a answer) { checkText(t, api, a) }
	cases := []pairCase{
		{name: "text", status: 200, provider: 1, calls: [2]int{1, 0}, check: text},
		{name: "tool", tools: true, status: 200, provider: 1, calls: [2]int{1, 0},
			script: func(string) []providertest.Response {
				return []providertest.Response{{ToolCall: &providertest.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: pairToolArgs}}}
			},
			check: func(t *testing.T, api, proto string, a answer) { checkTool(t, api, a) }},
		{name: "refusal", status: 200, provider: 1, calls: [2]int{1, 0},
			script: func(string) []providertest.Response { return []providertest.Response{{Refusal: pairRefusal}} },
			check:  checkRefusal},
		{name: "fallback", status: 200, provider: 2, calls: [2]int{1, 1},
			script: func(proto string) []providertest.Response {
				if proto == "anthropic" {
					return []providertest.Response{{Status: 529}}
				}
				return []providertest.Response{{Status: 500}}
			},
			check: text},
		{name: "rejected", status: 400, calls: [2]int{1, 0},
			script: func(string) []providertest.Response { return []providertest.Response{{Status: 400}} },
			check:  func(t *testing.T, api, proto string, a answer) { checkError(t, api, a, 400, "provider_rejected") }},
		{name: "all failing", status: 502, calls: [2]int{1, 1},
			script: func(string) []providertest.Response { return []providertest.Response{{Status: 503}} },
			second: []providertest.Response{{Status: 503}},
			check:  func(t *testing.T, api, proto string, a answer) { checkError(t, api, a, 502, "all_providers_failed") }},
		{name: "stream", stream: true, status: 200, provider: 1, calls: [2]int{1, 0}},
		{name: "stream fallback", stream: true, status: 200, provider: 2, calls: [2]int{1, 1},
			script: func(proto string) []providertest.Response {
				if proto == "anthropic" {
					return []providertest.Response{{Status: 529}}
				}
				return []providertest.Response{{Status: 500}}
			}},
	}
	names := map[string][2]string{"openai": {"p1", "claude"}, "anthropic": {"claude", "p1"}}
	for _, api := range pairAPIs {
		for _, proto := range []string{"openai", "anthropic"} {
			for _, c := range cases {
				t.Run(api.name+"/"+proto+"/"+c.name, func(t *testing.T) {
					url, up1, up2 := pairGateway(t, proto)
					if c.script != nil {
						up1.Script(c.script(proto)...)
					}
					up2.Script(c.second...)
					a := api.call(t, url, c.stream, c.tools)
					if a.status != c.status {
						t.Fatalf("status %d, want %d: %s", a.status, c.status, a.body)
					}
					if c.provider != 0 {
						wantDepth := fmt.Sprint(c.provider - 1)
						if a.provider != names[proto][c.provider-1] || a.depth != wantDepth {
							t.Errorf("answered by %q at depth %q, want %q at %s", a.provider, a.depth, names[proto][c.provider-1], wantDepth)
						}
					}
					if diff := cmp.Diff(c.calls, [2]int{up1.Calls(), up2.Calls()}); diff != "" {
						t.Errorf("upstream calls (-want +got):\n%s", diff)
					}
					if c.stream {
						events := strings.Split(strings.TrimSpace(a.body), "\n\n")
						if last := events[len(events)-1]; !strings.HasPrefix(last, api.terminal) {
							t.Errorf("last event %q, want %q first: %s", last, api.terminal, a.body)
						}
						if !strings.Contains(a.body, `"Hello"`) || !strings.Contains(a.body, `" world"`) {
							t.Errorf("stream without the text deltas: %s", a.body)
						}
						return
					}
					c.check(t, api.name, proto, a)
				})
			}
		}
	}
}
