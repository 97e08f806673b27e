package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// TestToHubTranslation checks each rule of the Messages → Chat
// Completions translation.
func TestToHubTranslation(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "minimal",
			in:   `{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","max_completion_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "max_tokens written as a float is an integer",
			in:   `{"model":"m","max_tokens":1e3,"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","max_completion_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "system string",
			in:   `{"model":"m","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "system text blocks joined by a blank line, cache_control dropped",
			in: `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],
				"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"system","content":"a\n\nb"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty system left out",
			in:   `{"model":"m","max_tokens":5,"system":"","messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty system array left out",
			in:   `{"model":"m","max_tokens":5,"system":[],"messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "text and image blocks",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
				{"type":"text","text":"what is this?"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
				{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}]}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":[
				{"type":"text","text":"what is this?"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]}`,
		},
		{
			name: "tool use and tool result",
			in: `{"model":"m","max_tokens":5,"messages":[
				{"role":"user","content":"weather in Paris?"},
				{"role":"assistant","content":[{"type":"text","text":"Let me look."},
					{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Paris", "days": 1.50}},
					{"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
					{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"12:00"}],"is_error":false},
					{"type":"text","text":"thanks"}]}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[
				{"role":"user","content":"weather in Paris?"},
				{"role":"assistant","content":[{"type":"text","text":"Let me look."}],"tool_calls":[
					{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":1.5}"}},
					{"id":"toolu_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"sunny"},
				{"role":"tool","tool_call_id":"toolu_2","content":[{"type":"text","text":"12:00"}]},
				{"role":"user","content":[{"type":"text","text":"thanks"}]}]}`,
		},
		{
			name: "assistant of tool calls only has null content; tool result without content; is_error dropped",
			in: `{"model":"m","max_tokens":5,"messages":[
				{"role":"user","content":"go"},
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"a":[1,2]}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true}]}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[
				{"role":"user","content":"go"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]},
				{"role":"tool","tool_call_id":"t1","content":""}]}`,
		},
		{
			name: "thinking blocks of an assistant turn are dropped",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},
				{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"a"}]},
				{"role":"user","content":"q2"}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"},
				{"role":"assistant","content":[{"type":"text","text":"a"}]},{"role":"user","content":"q2"}]}`,
		},
		{
			name: "final assistant prefill may be empty",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":""}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":""}]}`,
		},
		{
			name: "final assistant with an empty array",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[]}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":""}]}`,
		},
		{
			name: "sampling keeps the client's numbers",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],
				"stop_sequences":["\n\nHuman:","END"],"temperature":0.70,"top_p":1.0,"top_k":40}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],
				"stop":["\n\nHuman:","END"],"temperature":0.70,"top_p":1.0,"top_k":40}`,
		},
		{
			name: "empty stop_sequences left out",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"stop_sequences":[]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "tools and tool_choice auto",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}},
					{"type":"custom","name":"noop","input_schema":{"type":"object"}}],
				"tool_choice":{"type":"auto"}}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
					{"type":"function","function":{"name":"noop","parameters":{"type":"object"}}}],
				"tool_choice":"auto"}`,
		},
		{
			name: "tool_choice any without parallel tool use",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required","parallel_tool_calls":false}`,
		},
		{
			name: "tool_choice tool",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":false}}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		},
		{
			name: "tool_choice none",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"}}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],
				"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none"}`,
		},
		{
			name: "tool_choice auto without tools is left out",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "metadata user_id",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"metadata":{"user_id":"u-42"}}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],"user":"u-42"}`,
		},
		{
			name: "metadata without user_id",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"metadata":{"user_id":null}}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "stream asks for usage",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"stream":true}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "stream false",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"stream":false}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "gateway and provider copied",
			in: `{"model":"m:floor","max_tokens":5,"messages":[{"role":"user","content":"q"}],
				"gateway":{"retry":{"backoff":"250ms","max_total_attempts":3}},"provider":{"order":["a","b"],"zdr":true}}`,
			want: `{"model":"m:floor","max_completion_tokens":5,"messages":[{"role":"user","content":"q"}],
				"gateway":{"retry":{"backoff":"250ms","max_total_attempts":3}},"provider":{"order":["a","b"],"zdr":true}}`,
		},
		{
			name: "hints left out, thinking as reasoning_effort, nulls absent",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],
				"thinking":{"type":"enabled","budget_tokens":1024},"service_tier":"auto","container":null,"mcp_servers":[],"context_management":{},
				"temperature":null,"system":null,"tools":null,"tool_choice":null,"metadata":null,"stream":null}`,
			want: `{"model":"m","max_completion_tokens":5,"reasoning_effort":"low","messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "a system message inside messages stays at its place",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"system","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"system","content":"a\n\nb"}]}`,
		},
		{
			name: "adaptive thinking takes output_config's effort; server tools dropped; strict kept",
			in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"max"},
				"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{"type":"object"},"strict":true,"defer_loading":true}]}`,
			want: `{"model":"m","max_completion_tokens":5,"reasoning_effort":"high","messages":[{"role":"user","content":"q"}],
				"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}}]}`,
		},
		{
			name: "consecutive same-role turns stay apart",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b","citations":null}]}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"}]}]}`,
		},
		{
			name: "no HTML escaping",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"<a&b>"}]}]}`,
			want: `{"model":"m","max_completion_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"<a&b>"}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toHubChat([]byte(tt.in))
			if err != nil {
				t.Fatalf("decodeMessages: %v", err)
			}
			if diff := cmp.Diff(reqtest.DecodeJSON(t, []byte(tt.want)), reqtest.DecodeJSON(t, got)); diff != "" {
				t.Errorf("chat body (-want +got):\n%s\ngot %s", diff, got)
			}
			if bytes.Contains(got, []byte(`\u003c`)) {
				t.Errorf("HTML-escaped output: %s", got)
			}
			// The translation is what the gateway's own decoder accepts.
			req, err := llm.DecodeChatRequest(got)
			if err != nil {
				t.Fatalf("llm.DecodeChatRequest(%s): %v", got, err)
			}
			var in struct {
				Stream bool `json:"stream"`
			}
			_ = json.Unmarshal([]byte(tt.in), &in)
			if req.Stream != in.Stream || req.IncludeUsage != in.Stream {
				t.Errorf("Stream %v IncludeUsage %v, want both %v", req.Stream, req.IncludeUsage, in.Stream)
			}
		})
	}
}

// TestToHubErrors checks that each invalid request is an
// invalid_request error naming its field.
func TestToHubErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"q"}]`
	base := func(extra string) string {
		return `{"model":"m","max_tokens":5,` + msgs + extra + `}`
	}
	user := func(content string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":` + content + `}]}`
	}
	assistant := func(content string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":` + content + `},{"role":"user","content":"q"}]}`
	}
	tool := `,"tools":[{"name":"f","input_schema":{"type":"object"}}]`
	tests := []struct {
		name, in, param, msg string
	}{
		{"malformed JSON", `{"model":`, "", "not valid JSON"},
		{"empty body", ``, "", "not valid JSON"},
		{"not an object", `[1]`, "", "must be a JSON object"},
		{"null body", `null`, "", "must be a JSON object"},
		{"model missing", `{"max_tokens":5,` + msgs + `}`, "model", "model is required"},
		{"model empty", `{"model":"","max_tokens":5,` + msgs + `}`, "model", "must not be empty"},
		{"model not a string", `{"model":7,"max_tokens":5,` + msgs + `}`, "model", "must be a string"},
		{"max_tokens missing", `{"model":"m",` + msgs + `}`, "max_tokens", "max_tokens is required"},
		{"max_tokens null", `{"model":"m","max_tokens":null,` + msgs + `}`, "max_tokens", "max_tokens is required"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,` + msgs + `}`, "max_tokens", "from 1 to"},
		{"max_tokens negative", `{"model":"m","max_tokens":-3,` + msgs + `}`, "max_tokens", "from 1 to"},
		{"max_tokens fractional", `{"model":"m","max_tokens":1.5,` + msgs + `}`, "max_tokens", "must be an integer"},
		{"max_tokens string", `{"model":"m","max_tokens":"5",` + msgs + `}`, "max_tokens", "must be an integer"},
		{"max_tokens huge", `{"model":"m","max_tokens":1e300,` + msgs + `}`, "max_tokens", "from 1 to"},
		{"unknown field", base(`,"n":2`), "n", "unknown field n"},
		{"unknown fields, the first sorted", base(`,"zz":1,"aa":2`), "aa", "unknown field aa"},
		{"messages missing", `{"model":"m","max_tokens":5}`, "messages", "messages is required"},
		{"messages not an array", `{"model":"m","max_tokens":5,"messages":{}}`, "messages", "must be an array"},
		{"messages empty", `{"model":"m","max_tokens":5,"messages":[]}`, "messages", "must not be empty"},
		{"message not an object", `{"model":"m","max_tokens":5,"messages":["hi"]}`, "messages[0]", "must be an object"},
		{"message role missing", `{"model":"m","max_tokens":5,"messages":[{"content":"q"}]}`, "messages[0].role", "required"},
		{"message role developer", `{"model":"m","max_tokens":5,"messages":[{"role":"developer","content":"q"}]}`, "messages[0].role", `"user", "assistant" or "system"`},
		{"thinking type unknown", base(`,"thinking":{"type":"on"}`), "thinking.type", "must be"},
		{"thinking budget too small", base(`,"thinking":{"type":"enabled","budget_tokens":10}`), "thinking.budget_tokens", "from 1024"},
		{"output_config effort unknown", base(`,"output_config":{"effort":"huge"}`), "output_config.effort", "must be"},
		{"output_config unknown field", base(`,"output_config":{"verbosity":"low"}`), "output_config.verbosity", "unknown field"},
		{"message unknown field", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q","name":"x"}]}`, "messages[0].name", "unknown field"},
		{"content missing", `{"model":"m","max_tokens":5,"messages":[{"role":"user"}]}`, "messages[0].content", "required"},
		{"content a number", user(`3`), "messages[0].content", "string or an array"},
		{"content empty string", user(`""`), "messages[0].content", "must not be empty"},
		{"content empty array", user(`[]`), "messages[0].content", "must not be empty"},
		{"non-final assistant empty", assistant(`""`), "messages[1].content", "must not be empty"},
		{"block not an object", user(`["hi"]`), "messages[0].content[0]", "must be an object"},
		{"block type missing", user(`[{"text":"hi"}]`), "messages[0].content[0].type", "required"},
		{"block type unknown", user(`[{"type":"document","source":{}}]`), "messages[0].content[0].type", "not supported"},
		{"text empty", user(`[{"type":"text","text":""}]`), "messages[0].content[0].text", "non-empty"},
		{"text missing", user(`[{"type":"text"}]`), "messages[0].content[0].text", "non-empty"},
		{"text not a string", user(`[{"type":"text","text":1}]`), "messages[0].content[0].text", "must be a string"},
		{"text unknown field", user(`[{"type":"text","text":"a","foo":1}]`), "messages[0].content[0].foo", "unknown field"},
		{"image source missing", user(`[{"type":"image"}]`), "messages[0].content[0].source", "required"},
		{"image source not an object", user(`[{"type":"image","source":"x"}]`), "messages[0].content[0].source", "must be an object"},
		{"image source type missing", user(`[{"type":"image","source":{"data":"x"}}]`), "messages[0].content[0].source.type", "required"},
		{"image source type file", user(`[{"type":"image","source":{"type":"file","file_id":"f"}}]`), "messages[0].content[0].source.type", `"base64" or "url"`},
		{"image media_type bad", user(`[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"x"}}]`), "messages[0].content[0].source.media_type", "must be one of"},
		{"image media_type missing", user(`[{"type":"image","source":{"type":"base64","data":"x"}}]`), "messages[0].content[0].source.media_type", "required"},
		{"image data missing", user(`[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]`), "messages[0].content[0].source.data", "required"},
		{"image url missing", user(`[{"type":"image","source":{"type":"url"}}]`), "messages[0].content[0].source.url", "required"},
		{"image url not http", user(`[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]`), "messages[0].content[0].source.url", "http or https"},
		{"image source unknown field", user(`[{"type":"image","source":{"type":"url","url":"https://x","media_type":"image/png"}}]`), "messages[0].content[0].source.media_type", "unknown field"},
		{"image in assistant", assistant(`[{"type":"image","source":{"type":"url","url":"https://x"}}]`), "messages[1].content[0].type", "only allowed in user messages"},
		{"tool_use in user", user(`[{"type":"tool_use","id":"t","name":"f","input":{}}]`), "messages[0].content[0].type", "only allowed in assistant messages"},
		{"thinking in user", user(`[{"type":"thinking","thinking":"x"}]`), "messages[0].content[0].type", "only allowed in assistant messages"},
		{"tool_use id missing", assistant(`[{"type":"tool_use","name":"f","input":{}}]`), "messages[1].content[0].id", "required"},
		{"tool_use name missing", assistant(`[{"type":"tool_use","id":"t","input":{}}]`), "messages[1].content[0].name", "required"},
		{"tool_use input missing", assistant(`[{"type":"tool_use","id":"t","name":"f"}]`), "messages[1].content[0].input", "required"},
		{"tool_use input an array", assistant(`[{"type":"tool_use","id":"t","name":"f","input":[1]}]`), "messages[1].content[0].input", "must be an object"},
		{"tool_result in assistant", assistant(`[{"type":"tool_result","tool_use_id":"t"}]`), "messages[1].content[0].type", "only allowed in user messages"},
		{"tool_result id missing", user(`[{"type":"tool_result","content":"x"}]`), "messages[0].content[0].tool_use_id", "required"},
		{"tool_result is_error not bool", user(`[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]`), "messages[0].content[0].is_error", "boolean"},
		{"tool_result content a number", user(`[{"type":"tool_result","tool_use_id":"t","content":1}]`), "messages[0].content[0].content", "string or an array"},
		{"tool_result image", user(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]`), "messages[0].content[0].content[0].type", "images in a tool_result"},
		{"tool_result empty text", user(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":""}]}]`), "messages[0].content[0].content[0].text", "non-empty"},
		{"system a number", base(`,"system":1`), "system", "string or an array"},
		{"system block not text", base(`,"system":[{"type":"image","source":{}}]`), "system[0].type", `must be "text"`},
		{"system block empty", base(`,"system":[{"type":"text","text":""}]`), "system[0].text", "non-empty"},
		{"stop_sequences a string", base(`,"stop_sequences":"x"`), "stop_sequences", "array of strings"},
		{"stop_sequences element", base(`,"stop_sequences":["a",2]`), "stop_sequences[1]", "must be a string"},
		{"temperature a string", base(`,"temperature":"0.5"`), "temperature", "must be a number"},
		{"temperature too high", base(`,"temperature":1.5`), "temperature", "from 0 to 1"},
		{"top_p negative", base(`,"top_p":-0.1`), "top_p", "from 0 to 1"},
		{"top_p bool", base(`,"top_p":true`), "top_p", "must be a number"},
		{"top_k fractional", base(`,"top_k":2.5`), "top_k", "must be an integer"},
		{"top_k negative", base(`,"top_k":-1`), "top_k", "from 0"},
		{"tools an object", base(`,"tools":{}`), "tools", "array of tools"},
		{"tool not an object", base(`,"tools":[1]`), "tools[0]", "must be an object"},
		{"tool name missing", base(`,"tools":[{"input_schema":{"type":"object"}}]`), "tools[0].name", "required"},
		{"tool schema missing", base(`,"tools":[{"name":"f"}]`), "tools[0].input_schema", "required"},
		{"tool schema not an object", base(`,"tools":[{"name":"f","input_schema":"x"}]`), "tools[0].input_schema", "schema object"},
		{"tool server type without a name", base(`,"tools":[{"type":"web_search_20250305"}]`), "tools[0].name", "required"},
		{"tool unknown field", base(`,"tools":[{"name":"f","input_schema":{},"parameters":{}}]`), "tools[0].parameters", "unknown field"},
		{"tool names repeated", base(`,"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}]`), "tools[1].name", "unique"},
		{"tool description a number", base(`,"tools":[{"name":"f","description":2,"input_schema":{}}]`), "tools[0].description", "must be a string"},
		{"tool_choice a string", base(tool + `,"tool_choice":"auto"`), "tool_choice", "must be an object"},
		{"tool_choice type missing", base(tool + `,"tool_choice":{}`), "tool_choice.type", "required"},
		{"tool_choice type unknown", base(tool + `,"tool_choice":{"type":"required"}`), "tool_choice.type", "must be"},
		{"tool_choice tool without name", base(tool + `,"tool_choice":{"type":"tool"}`), "tool_choice.name", "required"},
		{"tool_choice tool unknown name", base(tool + `,"tool_choice":{"type":"tool","name":"g"}`), "tool_choice.name", "not one of the tools"},
		{"tool_choice name with auto", base(tool + `,"tool_choice":{"type":"auto","name":"f"}`), "tool_choice.name", "only allowed"},
		{"tool_choice any without tools", base(`,"tool_choice":{"type":"any"}`), "tool_choice.type", "requires tools"},
		{"tool_choice parallel not bool", base(tool + `,"tool_choice":{"type":"auto","disable_parallel_tool_use":1}`), "tool_choice.disable_parallel_tool_use", "boolean"},
		{"tool_choice unknown field", base(tool + `,"tool_choice":{"type":"auto","x":1}`), "tool_choice.x", "unknown field"},
		{"metadata not an object", base(`,"metadata":"u"`), "metadata", "must be an object"},
		{"metadata unknown field", base(`,"metadata":{"user":"u"}`), "metadata.user", "unknown field"},
		{"metadata user_id a number", base(`,"metadata":{"user_id":5}`), "metadata.user_id", "must be a string"},
		{"stream a string", base(`,"stream":"true"`), "stream", "boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := toHubChat([]byte(tt.in))
			if err == nil {
				t.Fatalf("no error; got %s", out)
			}
			reqtest.CheckInvalid(t, err, tt.param, tt.msg)
		})
	}
}

// toHubSeeds are the fuzz corpus's starting points.
var toHubSeeds = []string{
	`{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}],"stream":true}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"x":1.50}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]},{"type":"text","text":"go on"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true}}`,
	`{"model":"m:floor","max_tokens":5,"messages":[{"role":"user","content":"q"}],"temperature":0.5,"top_p":0.9,"top_k":3,"stop_sequences":["x"],"metadata":{"user_id":"u"},"gateway":{"retry":{"backoff":250}},"provider":{"sort":"price"}}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":""}],"thinking":{"type":"enabled"}}`,
	`{"model":`, `[]`, `null`, `{}`,
}

// FuzzToHub checks that no body panics the decoder, that every
// failure is an invalid_request error naming its param (but for a body
// that is not a JSON object), and that every translation is a
// body llm.DecodeChatRequest accepts (but for the checks left to it: the
// model's length and the gateway and provider objects).
func FuzzToHub(f *testing.F) {
	for _, s := range toHubSeeds {
		f.Add([]byte(s))
	}
	for _, b := range reqtest.AgentBodies(f, "claude-code") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, err := toHubChat(body)
		if err != nil {
			reqtest.CheckNamesParam(t, err)
			return
		}
		if !json.Valid(chat) {
			t.Fatalf("invalid JSON out: %s", chat)
		}
		if _, err := llm.DecodeChatRequest(chat); err != nil {
			var e *llm.Error
			ok := errors.As(err, &e) && (e.Param == "model" && strings.Contains(e.Message, "longer") ||
				strings.HasPrefix(e.Param, "gateway") || strings.HasPrefix(e.Param, "provider"))
			if !ok {
				t.Fatalf("llm.DecodeChatRequest(%s): %v", chat, err)
			}
		}
	})
}

// toHubChat is ToHub without the hints.
func toHubChat(body []byte) (chat []byte, err error) {
	hub, _, err := ToHub(body)
	return hub.Bytes(), err
}
