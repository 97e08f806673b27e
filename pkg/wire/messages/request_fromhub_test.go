package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

func TestFromHub(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "minimal: default max_tokens, always streaming",
			body: `{"model":"ignored","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}]}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"stream":true}`,
		},
		{
			name: "system and developer messages become system",
			body: `{"messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":[{"type":"text","text":"Use "},{"type":"text","text":"French."}]},{"role":"user","content":"Hi"}],"max_tokens":50}`,
			want: `{"model":"claude-x","max_tokens":50,"system":"Be brief.\n\nUse French.","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"stream":true}`,
		},
		{
			name: "multi-turn, max_completion_tokens wins",
			body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"max_tokens":10,"max_completion_tokens":20}`,
			want: `{"model":"claude-x","max_tokens":20,"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":[{"type":"text","text":"c"}]}],"stream":true}`,
		},
		{
			name: "consecutive user turns merged",
			body: `{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"},{"type":"text","text":""}]}]}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"stream":true}`,
		},
		{
			name: "images: data URL to base64, https to url",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"What?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"What?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}]}],"stream":true}`,
		},
		{
			name: "tools, tool calls and merged tool results",
			body: `{"messages":[
				{"role":"user","content":"Weather in Paris and Rome?"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":""}}]},
				{"role":"tool","tool_call_id":"call_1","content":"sunny"},
				{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"rain"}]},
				{"role":"user","content":"Thanks"}],
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
				         {"type":"function","function":{"name":"now"}}],
				"tool_choice":"auto"}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[` +
				`{"role":"user","content":[{"type":"text","text":"Weather in Paris and Rome?"}]},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"call_2","name":"get_weather","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"sunny"},{"type":"tool_result","tool_use_id":"call_2","content":"rain"},{"type":"text","text":"Thanks"}]}],` +
				`"stream":true,"tools":[{"name":"get_weather","description":"Weather now","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},{"name":"now","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto"}}`,
		},
		{
			name: "tool_choice required, parallel off",
			body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","parallel_tool_calls":false}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"disable_parallel_tool_use":true,"type":"any"}}`,
		},
		{
			name: "tool_choice none",
			body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"none"}}`,
		},
		{
			name: "tool_choice a function",
			body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"name":"f","type":"tool"}}`,
		},
		{
			name: "tool_choice without tools is dropped",
			body: `{"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true}`,
		},
		{
			name: "stop string, sampling, user; OpenAI-only fields dropped",
			body: `{"messages":[{"role":"user","content":"x"}],"stop":"END","temperature":0.5,"top_p":0.9,"user":"u-42","n":1,"seed":7,"presence_penalty":0.1,"frequency_penalty":0.1,"logit_bias":{},"logprobs":false,"top_logprobs":0,"response_format":{"type":"text"},"metadata":{"a":"b"},"store":true}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"temperature":0.5,"top_p":0.9,"stop_sequences":["END"],"metadata":{"user_id":"u-42"}}`,
		},
		{
			name: "reasoning_effort as a thinking budget, cut to max_tokens",
			body: `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","max_completion_tokens":8000}`,
			want: `{"model":"claude-x","max_tokens":8000,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"thinking":{"type":"enabled","budget_tokens":7999}}`,
		},
		{
			name: "json_schema response_format as a forced tool; reasoning_effort left out",
			body: `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"low","response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"tools":[{"name":"answer","description":"Give the answer as this tool's input.","input_schema":{"type":"object","properties":{"a":{"type":"string"}}}}],"tool_choice":{"name":"answer","type":"tool"}}`,
		},
		{
			name: "stop list, top_k passes",
			body: `{"messages":[{"role":"user","content":"x"}],"stop":["a","b"],"top_k":5}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"top_k":5,"stop_sequences":["a","b"]}`,
		},
		{
			name: "assistant refusal part and empty assistant left out",
			body: `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"refusal","refusal":"No."}]},{"role":"assistant","content":""},{"role":"user","content":"y"}]}`,
			want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":[{"type":"text","text":"No."}]},{"role":"user","content":[{"type":"text","text":"y"}]}],"stream":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fromHubBody(&llm.UpstreamRequest{Model: "claude-x", Body: []byte(tt.body)})
			if err != nil {
				t.Fatalf("FromHub: %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromHubRejects(t *testing.T) {
	tests := []struct{ name, body, msg string }{
		{"not JSON", `{`, "request body is not a valid chat completions request"},
		{"no messages", `{"messages":[{"role":"system","content":"s"}]}`, "messages must contain at least one user or assistant message"},
		{"audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, `messages[0].content[0]: content part type "input_audio" is not supported by this provider`},
		{"ftp image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`, "messages[0].content[0].image_url.url: must be a data: URL or an http(s) URL"},
		{"data URL not base64", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url: a data: URL must be base64 with a media type (data:image/png;base64,...)"},
		{"bad arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments must be a JSON object"},
		{"tool without id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id is required"},
		{"function role", `{"messages":[{"role":"function","name":"f","content":"x"}]}`, `messages[0].role "function" is not supported by this provider`},
		{"custom tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"g"}}]}`, `tools[0].type "custom" is not supported by this provider`},
		{"tool_choice allowed_tools", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"allowed_tools"}}`, "tool_choice must be auto, none, required or a function"},
		{"stop number", `{"messages":[{"role":"user","content":"x"}],"stop":3}`, "stop must be a string or an array of strings"},
		{"image in system", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"user","content":"x"}]}`, "messages[0].content may only hold text for this provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fromHubBody(&llm.UpstreamRequest{Model: "m", Body: []byte(tt.body)})
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want a *llm.ProviderError", err)
			}
			if pe.Class != llm.FailRejected || pe.Message != tt.msg {
				t.Errorf("got %v %q, want rejected %q", pe.Class, pe.Message, tt.msg)
			}
		})
	}
}

// TestFromHubValidJSON: whatever the input, a translated body is a
// JSON object with stream true and a positive max_tokens.
func TestFromHubValidJSON(t *testing.T) {
	got, err := fromHubBody(&llm.UpstreamRequest{Model: "m", Body: []byte(`{"messages":[{"role":"user","content":"<b>&</b> \u2028"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil || m["stream"] != true {
		t.Fatalf("%s: %v", got, err)
	}
	if !strings.Contains(string(got), "<b>&</b>") {
		t.Errorf("HTML escaped: %s", got)
	}
}

// FuzzFromHub: no body panics; a body is either translated into a
// JSON object that streams, or rejected as the request's fault.
func FuzzFromHub(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"Hi"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","stop":"x"}`,
		`{"messages":null,"max_tokens":1e400}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := fromHubBody(&llm.UpstreamRequest{Model: "m", Body: body})
		if err != nil {
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Class != llm.FailRejected {
				t.Fatalf("error %v is not a rejection", err)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil || m["stream"] != true {
			t.Fatalf("translated %s: %v", out, err)
		}
	})
}

// TestFromHubRefuses: a field Messages cannot honour, set beyond
// its default, refuses the request with a rejection naming it.
func TestFromHubRefuses(t *testing.T) {
	for field, extra := range map[string]string{
		"n":             `"n":2`,
		"logprobs":      `"logprobs":true`,
		"top_logprobs":  `"top_logprobs":3`,
		"logit_bias":    `"logit_bias":{"1":2}`,
		"audio":         `"audio":{"voice":"alloy","format":"wav"}`,
		"modalities":    `"modalities":["text","audio"]`,
		"functions":     `"functions":[{"name":"f"}]`,
		"function_call": `"function_call":"auto"`,
	} {
		_, err := fromHubBody(&llm.UpstreamRequest{Model: "claude-x", Body: []byte(`{"messages":[{"role":"user","content":"x"}],` + extra + `}`)})
		var pe *llm.ProviderError
		if !errors.As(err, &pe) || pe.Class != llm.FailRejected || !strings.HasPrefix(pe.Message, field+": ") {
			t.Errorf("%s: err %v, want a rejection naming it", field, err)
		}
	}
}

// fromHubBody is FromHub's body alone, what the tests compare.
func fromHubBody(req *llm.UpstreamRequest) ([]byte, error) {
	b, _, _, err := FromHub(req)
	return b, err
}

// BenchmarkFromHub is the translation of a coding agent's Chat
// Completions turn of 10 KB and of 1 MB (many turns of long text with
// escapes, non-ASCII and tool calls) into a Messages body.
func BenchmarkFromHub(b *testing.B) {
	text := strings.Repeat(`Résumé of \"main.go\":\n\tfunc main() {}\n`, 20)
	for _, size := range []int{10 << 10, 1 << 20} {
		var turns []string
		for n, i := 0, 0; n < size; i++ {
			t := fmt.Sprintf(`{"role":"user","content":"%s"}`, text)
			if i%2 == 1 {
				t = fmt.Sprintf(`{"role":"assistant","content":"%s","tool_calls":[{"id":"c%d","type":"function","function":{"name":"read","arguments":"{\"path\":\"main.go\"}"}}]},{"role":"tool","tool_call_id":"c%d","content":"%s"}`, text, i, i, text)
			}
			turns = append(turns, t)
			n += len(t) + 1
		}
		body := []byte(`{"model":"m","max_tokens":1024,"messages":[{"role":"system","content":"be brief"},` + strings.Join(turns, ",") +
			`],"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}}]}`)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fromHubBody(&llm.UpstreamRequest{Model: "claude-x", Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
