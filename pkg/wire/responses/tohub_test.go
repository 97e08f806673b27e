package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// rsCheckChat checks that a translation is a body llm.DecodeChatRequest
// accepts, streaming as the Responses request asked.
func rsCheckChat(t *testing.T, in string, chat []byte) {
	t.Helper()
	if bytes.Contains(chat, []byte(`\u003c`)) {
		t.Errorf("HTML-escaped output: %s", chat)
	}
	req, err := llm.DecodeChatRequest(chat)
	if err != nil {
		t.Fatalf("llm.DecodeChatRequest(%s): %v", chat, err)
	}
	var body struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal([]byte(in), &body)
	if req.Stream != body.Stream || req.IncludeUsage != body.Stream {
		t.Errorf("Stream %v IncludeUsage %v, want both %v", req.Stream, req.IncludeUsage, body.Stream)
	}
}

// TestDecodeResponsesTranslation checks each rule of the Responses → Chat
// Completions translation.
func TestDecodeResponsesTranslation(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "input string",
			in:   `{"model":"m","input":"hi"}`,
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty input string is still a user message",
			in:   `{"model":"m","input":""}`,
			want: `{"model":"m","messages":[{"role":"user","content":""}]}`,
		},
		{
			name: "instructions lead",
			in:   `{"model":"m","instructions":"be brief","input":"hi"}`,
			want: `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty instructions left out",
			in:   `{"model":"m","instructions":"","input":"hi"}`,
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "easy messages of every role, developer as system",
			in: `{"model":"m","input":[{"role":"system","content":"s"},{"role":"developer","content":"d"},
				{"role":"user","content":"u"},{"type":"message","role":"assistant","content":"a"},{"role":"user","content":"u2"}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"system","content":"d"},
				{"role":"user","content":"u"},{"role":"assistant","content":"a"},{"role":"user","content":"u2"}]}`,
		},
		{
			name: "content parts: text and images",
			in: `{"model":"m","input":[{"type":"message","role":"user","content":[
				{"type":"input_text","text":"what is this?"},
				{"type":"input_image","image_url":"https://example.com/cat.jpg","detail":"auto"},
				{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","file_id":null},
				{"type":"input_image","image_url":"https://example.com/dog.jpg","detail":"low"}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":[
				{"type":"text","text":"what is this?"},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"auto"}},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
				{"type":"image_url","image_url":{"url":"https://example.com/dog.jpg","detail":"low"}}]}]}`,
		},
		{
			name: "developer parts",
			in:   `{"model":"m","input":[{"role":"developer","content":[{"type":"input_text","text":"rules"}]},{"role":"user","content":"q"}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"rules"}]},{"role":"user","content":"q"}]}`,
		},
		{
			name: "an earlier output message sent back, as the SDKs do",
			in: `{"model":"m","input":[{"role":"user","content":"q"},
				{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[
					{"type":"output_text","text":"a","annotations":[],"logprobs":[]},{"type":"refusal","refusal":"no"}]},
				{"role":"user","content":"q2"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"},
				{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"no"}]},
				{"role":"user","content":"q2"}]}`,
		},
		{
			name: "function calls merged into the assistant message before them; outputs as tool messages",
			in: `{"model":"m","input":[{"role":"user","content":"weather in Paris?"},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
				{"type":"reasoning","id":"rs_1","summary":[]},
				{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
				{"type":"function_call","call_id":"call_2","name":"get_time","arguments":"{}"},
				{"type":"function_call_output","call_id":"call_1","output":"sunny"},
				{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"12:00"}]},
				{"role":"user","content":"thanks"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"weather in Paris?"},
				{"role":"assistant","content":[{"type":"text","text":"Let me look."}],"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"sunny"},
				{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"12:00"}]},
				{"role":"user","content":"thanks"}]}`,
		},
		{
			name: "function calls alone make an assistant message of null content; an empty assistant text is null too",
			in: `{"model":"m","input":[{"role":"user","content":"go"},
				{"type":"function_call","call_id":"c1","name":"f","arguments":""},
				{"type":"function_call_output","call_id":"c1","output":[]},
				{"role":"assistant","content":""},
				{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c2","output":"ok"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]},
				{"role":"tool","tool_call_id":"c1","content":""},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c2","content":"ok"}]}`,
		},
		{
			name: "calls after a tool output start a new assistant message",
			in: `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":"1"},
				{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c2","output":"2"}]}`,
			want: `{"model":"m","messages":[
				{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c1","content":"1"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c2","content":"2"}]}`,
		},
		{
			name: "sampling keeps the client's numbers; max_output_tokens as max_completion_tokens",
			in:   `{"model":"m","input":"q","max_output_tokens":1e3,"temperature":1.50,"top_p":1.0}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"max_completion_tokens":1000,"temperature":1.50,"top_p":1.0}`,
		},
		{
			name: "function tools, tool_choice required, parallel_tool_calls",
			in: `{"model":"m","input":"q","tools":[
				{"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true},
				{"type":"function","name":"noop","parameters":null,"strict":null}],
				"tool_choice":"required","parallel_tool_calls":false}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"tools":[
				{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}},
				{"type":"function","function":{"name":"noop"}}],
				"tool_choice":"required","parallel_tool_calls":false}`,
		},
		{
			name: "tool_choice function",
			in:   `{"model":"m","input":"q","tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":false}],"tool_choice":{"type":"function","name":"f"}}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":false}}],
				"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		},
		{
			name: "tool_choice auto and none",
			in:   `{"model":"m","input":"q","tools":[{"type":"function","name":"f"}],"tool_choice":"none"}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
		},
		{
			name: "tool_choice and parallel_tool_calls without tools are left out",
			in:   `{"model":"m","input":"q","tools":[],"tool_choice":"auto","parallel_tool_calls":true}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "text format text is nothing; verbosity as verbosity",
			in:   `{"model":"m","input":"q","text":{"format":{"type":"text"},"verbosity":"low"}}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"verbosity":"low"}`,
		},
		{
			name: "text format json_object",
			in:   `{"model":"m","input":"q","text":{"format":{"type":"json_object"}}}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"response_format":{"type":"json_object"}}`,
		},
		{
			name: "text format json_schema",
			in: `{"model":"m","input":"q","text":{"format":{"type":"json_schema","name":"answer","description":"An answer",
				"schema":{"type":"object","properties":{"n":{"type":"number","minimum":0.50}}},"strict":true}}}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"response_format":{"type":"json_schema","json_schema":{
				"name":"answer","description":"An answer","schema":{"type":"object","properties":{"n":{"type":"number","minimum":0.50}}},"strict":true}}}`,
		},
		{
			name: "user",
			in:   `{"model":"m","input":"q","user":"u-1"}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"user":"u-1"}`,
		},
		{
			name: "safety_identifier wins over user",
			in:   `{"model":"m","input":"q","user":"u-1","safety_identifier":"s-1"}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"user":"s-1"}`,
		},
		{
			name: "stream asks for usage",
			in:   `{"model":"m","input":"q","stream":true}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "stream false",
			in:   `{"model":"m","input":"q","stream":false}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "gateway and provider copied",
			in: `{"model":"m:floor","input":"q","gateway":{"retry":{"backoff":"250ms","max_total_attempts":3}},
				"provider":{"order":["a","b"],"zdr":true}}`,
			want: `{"model":"m:floor","messages":[{"role":"user","content":"q"}],"gateway":{"retry":{"backoff":"250ms","max_total_attempts":3}},
				"provider":{"order":["a","b"],"zdr":true}}`,
		},
		{
			name: "gateway-read and ignored fields are not forwarded",
			in: `{"model":"m","input":"q","store":false,"metadata":{"k":"v"},"background":false,"top_logprobs":0,
				"reasoning":{"effort":"low","summary":null},"truncation":"auto","include":["reasoning.encrypted_content"],
				"service_tier":"auto","prompt_cache_key":"pk","prompt_cache_retention":"24h","max_tool_calls":3,
				"stream_options":{"include_obfuscation":false},"client_metadata":{"k":"v"}}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"reasoning_effort":"low"}`,
		},
		{
			name: "namespace tools flattened, built-in tools and reasoning items dropped",
			in: `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"content":null,"encrypted_content":"gAAA"},{"role":"user","content":"q"}],
				"tools":[{"type":"web_search","external_web_access":false},{"type":"namespace","name":"ns","description":"d","tools":[{"type":"function","name":"f","strict":false,"parameters":{"type":"object"}}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":false}}]}`,
		},
		{
			name: "nulls are absent",
			in: `{"model":"m","input":"q","instructions":null,"max_output_tokens":null,"temperature":null,"top_p":null,"tools":null,
				"tool_choice":null,"parallel_tool_calls":null,"text":null,"metadata":null,"user":null,"safety_identifier":null,
				"stream":null,"store":null,"previous_response_id":null,"background":null,"top_logprobs":null,"conversation":null,
				"prompt":null,"gateway":null,"provider":null,"reasoning":null,"truncation":null,"include":null,"service_tier":null,
				"prompt_cache_key":null,"prompt_cache_retention":null,"max_tool_calls":null,"stream_options":null}`,
			want: `{"model":"m","messages":[{"role":"user","content":"q"}]}`,
		},
		{
			name: "instructions alone with only reasoning input",
			in:   `{"model":"m","instructions":"i","input":[{"type":"reasoning","id":"rs","summary":[]}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"i"}]}`,
		},
		{
			name: "no HTML escaping",
			in:   `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"<a&b>"}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"<a&b>"}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ToHub([]byte(tt.in), nil)
			if err != nil {
				t.Fatalf("ToHub: %v", err)
			}
			if diff := cmp.Diff(reqtest.DecodeJSON(t, []byte(tt.want)), reqtest.DecodeJSON(t, r.Chat)); diff != "" {
				t.Errorf("chat body (-want +got):\n%s\ngot %s", diff, r.Chat)
			}
			rsCheckChat(t, tt.in, r.Chat)
		})
	}
}

// TestDecodeResponsesFields checks what is read for the gateway besides the
// Chat body.
func TestDecodeResponsesFields(t *testing.T) {
	type fields struct {
		PreviousResponseID string
		Store              bool
		Input              []string
		Metadata           string
		Instructions       string
		ChatNil            bool
	}
	tests := []struct {
		name string
		in   string
		want fields
	}{
		{
			name: "defaults",
			in:   `{"model":"m","input":"hi"}`,
			want: fields{Store: true, Input: []string{`{"role":"user","content":"hi"}`}},
		},
		{
			name: "store false, metadata compacted, instructions kept apart from input",
			in:   `{"model":"m","input":"hi","store":false,"metadata":{ "a" : "1", "b":"" },"instructions":"be brief"}`,
			want: fields{Input: []string{`{"role":"user","content":"hi"}`}, Metadata: `{"a":"1","b":""}`, Instructions: "be brief"},
		},
		{
			name: "a name given twice reads as its last value; names match exactly",
			in:   `{"model":"m","input":"a","store":true,"input":[{"role":"user","content":"b","content":"c"}],"st\u006fre":false}`,
			want: fields{Input: []string{`{"role":"user","content":"c"}`}},
		},
		{
			name: "empty metadata is echoed",
			in:   `{"model":"m","input":"hi","metadata":{}}`,
			want: fields{Store: true, Input: []string{`{"role":"user","content":"hi"}`}, Metadata: `{}`},
		},
		{
			name: "previous_response_id without prior: parsed, Chat nil",
			in:   `{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			want: fields{PreviousResponseID: "resp_1", Store: true, ChatNil: true,
				Input: []string{`{"role":"tool","content":"ok","tool_call_id":"c1"}`}},
		},
		{
			name: "merged input",
			in: `{"model":"m","input":[{"role":"assistant","content":"a"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c","output":"r"}]}`,
			want: fields{Store: true, Input: []string{
				`{"role":"assistant","content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
				`{"role":"tool","content":"r","tool_call_id":"c"}`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ToHub([]byte(tt.in), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := fields{PreviousResponseID: r.PreviousResponseID, Store: r.Store, Metadata: string(r.Metadata),
				Instructions: r.Instructions, ChatNil: r.Chat == nil}
			for _, m := range r.Input {
				got.Input = append(got.Input, string(m))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if r.Metadata == nil != (tt.want.Metadata == "") {
				t.Errorf("Metadata %q", r.Metadata)
			}
		})
	}
}

// TestDecodeResponsesPrior checks that the previous turn's conversation
// goes after the new instructions and before this turn's input, and that a
// tool output may answer a call of the previous turn.
func TestDecodeResponsesPrior(t *testing.T) {
	prior := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"weather in Paris?"}`),
		json.RawMessage(` {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`),
	}
	in := `{"model":"m","instructions":"new rules","previous_response_id":"resp_1","stream":true,
		"input":[{"type":"function_call_output","call_id":"call_1","output":"sunny"},{"role":"user","content":"and tomorrow?"}]}`
	want := `{"model":"m","messages":[{"role":"system","content":"new rules"},
		{"role":"user","content":"weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"user","content":"and tomorrow?"}],
		"stream":true,"stream_options":{"include_usage":true}}`

	// In one call.
	r, err := ToHub([]byte(in), prior)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reqtest.DecodeJSON(t, []byte(want)), reqtest.DecodeJSON(t, r.Chat)); diff != "" {
		t.Errorf("chat body (-want +got):\n%s\ngot %s", diff, r.Chat)
	}
	rsCheckChat(t, in, r.Chat)
	if len(r.Input) != 2 {
		t.Errorf("Input has %d messages, want this turn's 2", len(r.Input))
	}

	// In two steps.
	r2, err := parseRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if r2.Chat != nil || r2.PreviousResponseID != "resp_1" {
		t.Fatalf("parse: Chat %s, PreviousResponseID %q", r2.Chat, r2.PreviousResponseID)
	}
	if err := r2.build(prior); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Chat, r2.Chat) {
		t.Errorf("two steps %s, one call %s", r2.Chat, r.Chat)
	}

	// A stored conversation continued by a new turn, instructions not
	// carried over (prior has none).
	r3, err := ToHub([]byte(`{"model":"m","previous_response_id":"resp_1","input":"more"}`), prior[:1])
	if err != nil {
		t.Fatal(err)
	}
	want3 := `{"model":"m","messages":[{"role":"user","content":"weather in Paris?"},{"role":"user","content":"more"}]}`
	if diff := cmp.Diff(reqtest.DecodeJSON(t, []byte(want3)), reqtest.DecodeJSON(t, r3.Chat)); diff != "" {
		t.Errorf("chat body (-want +got):\n%s", diff)
	}

	// A tool output answering no call of prior or input.
	_, err = ToHub([]byte(`{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_9","output":"x"}]}`), prior)
	var e *llm.Error
	if !errors.As(err, &e) || e.Code != llm.CodeInvalidRequest || e.Param != "input[0].call_id" || !strings.Contains(e.Message, "no tool call found") {
		t.Errorf("unanswered output: %v", err)
	}

	// An unusable stored turn is the gateway's fault, not the client's.
	_, err = ToHub([]byte(`{"model":"m","previous_response_id":"resp_1","input":"x"}`), []json.RawMessage{json.RawMessage(`[1]`)})
	if !errors.As(err, &e) || e.Code != llm.CodeInternal {
		t.Errorf("bad prior: %v, want an internal error", err)
	}
}

// TestDecodeResponsesErrors checks that each invalid request is an
// invalid_request error naming its field.
func TestDecodeResponsesErrors(t *testing.T) {
	base := func(extra string) string {
		return `{"model":"m","input":"q"` + extra + `}`
	}
	items := func(list string) string {
		return `{"model":"m","input":[` + list + `]}`
	}
	user := func(parts string) string {
		return items(`{"role":"user","content":` + parts + `}`)
	}
	assistant := func(parts string) string {
		return items(`{"role":"assistant","content":` + parts + `}`)
	}
	tool := `,"tools":[{"type":"function","name":"f"}]`
	tests := []struct {
		name, in, param, msg string
	}{
		{"malformed JSON", `{"model":`, "", "not valid JSON"},
		{"empty body", ``, "", "not valid JSON"},
		{"not an object", `[1]`, "", "must be a JSON object"},
		{"null body", `null`, "", "must be a JSON object"},
		{"model missing", `{"input":"q"}`, "model", "model is required"},
		{"model empty", `{"model":"","input":"q"}`, "model", "must not be empty"},
		{"model a number", `{"model":1,"input":"q"}`, "model", "must be a string"},
		{"unknown field", base(`,"n":2`), "n", "unknown field n"},
		{"unknown fields, the first sorted", base(`,"zz":1,"aa":2`), "aa", "unknown field aa"},
		{"chat field messages", base(`,"messages":[]`), "messages", "unknown field"},
		{"chat field max_tokens", base(`,"max_tokens":5`), "max_tokens", "unknown field"},
		{"input missing", `{"model":"m"}`, "input", "input is required"},
		{"input a number", `{"model":"m","input":1}`, "input", "string or an array"},
		{"input empty", `{"model":"m","input":[]}`, "input", "must not be empty"},
		{"input only reasoning", items(`{"type":"reasoning","summary":[]}`), "input", "no message"},
		{"item not an object", items(`"hi"`), "input[0]", "must be an object"},
		{"item without type or role", items(`{"content":"hi"}`), "input[0].type", "required"},
		{"item type a number", items(`{"type":1}`), "input[0].type", "must be a string"},
		{"item type unknown", items(`{"type":"web_search_call","id":"x"}`), "input[0].type", "not supported"},
		{"item_reference", items(`{"type":"item_reference","id":"msg_1"}`), "input[0].type", "previous_response_id"},
		{"message role bad", items(`{"role":"tool","content":"x"}`), "input[0].role", `"user", "assistant"`},
		{"message role empty", items(`{"type":"message","role":"","content":"x"}`), "input[0].role", "must not be empty"},
		{"message role missing", items(`{"type":"message","content":"x"}`), "input[0].role", "required"},
		{"message content missing", items(`{"role":"user"}`), "input[0].content", "required"},
		{"message content a number", user(`1`), "input[0].content", "string or an array"},
		{"message content empty", user(`[]`), "input[0].content", "must not be empty"},
		{"message unknown field", items(`{"role":"user","content":"x","name":"n"}`), "input[0].name", "unknown field"},
		{"message status a number", items(`{"role":"user","content":"x","status":1}`), "input[0].status", "must be a string"},
		{"part not an object", user(`["x"]`), "input[0].content[0]", "must be an object"},
		{"part type missing", user(`[{"text":"x"}]`), "input[0].content[0].type", "required"},
		{"part type unknown", user(`[{"type":"text","text":"x"}]`), "input[0].content[0].type", "not a content part type"},
		{"input_text text missing", user(`[{"type":"input_text"}]`), "input[0].content[0].text", "required"},
		{"input_text text a number", user(`[{"type":"input_text","text":1}]`), "input[0].content[0].text", "must be a string"},
		{"input_text unknown field", user(`[{"type":"input_text","text":"x","cache_control":{}}]`), "input[0].content[0].cache_control", "unknown field"},
		{"input_text in assistant", assistant(`[{"type":"input_text","text":"x"}]`), "input[0].content[0].type", "output_text and refusal"},
		{"output_text in user", user(`[{"type":"output_text","text":"x"}]`), "input[0].content[0].type", "not allowed in a user message"},
		{"refusal in user", user(`[{"type":"refusal","refusal":"x"}]`), "input[0].content[0].type", "not allowed"},
		{"image in system", items(`{"role":"system","content":[{"type":"input_image","image_url":"https://x"}]}`), "input[0].content[0].type", "input_text parts"},
		{"image in developer", items(`{"role":"developer","content":[{"type":"input_image","image_url":"https://x"}]}`), "input[0].content[0].type", "developer message"},
		{"output_text text missing", assistant(`[{"type":"output_text"}]`), "input[0].content[0].text", "required"},
		{"refusal missing", assistant(`[{"type":"refusal"}]`), "input[0].content[0].refusal", "required"},
		{"input_file", user(`[{"type":"input_file","file_id":"f"}]`), "input[0].content[0].type", "not supported"},
		{"input_audio", user(`[{"type":"input_audio","input_audio":{}}]`), "input[0].content[0].type", "not supported"},
		{"image file_id", user(`[{"type":"input_image","file_id":"file-1","detail":"auto"}]`), "input[0].content[0].file_id", "not supported"},
		{"image url missing", user(`[{"type":"input_image","detail":"auto"}]`), "input[0].content[0].image_url", "required"},
		{"image url not http", user(`[{"type":"input_image","image_url":"file:///etc/passwd"}]`), "input[0].content[0].image_url", "http or https"},
		{"image data URL not base64", user(`[{"type":"input_image","image_url":"data:image/png,abc"}]`), "input[0].content[0].image_url", "base64"},
		{"image data URL not an image", user(`[{"type":"input_image","image_url":"data:text/plain;base64,YQ=="}]`), "input[0].content[0].image_url", "http or https"},
		{"image detail bad", user(`[{"type":"input_image","image_url":"https://x","detail":"max"}]`), "input[0].content[0].detail", `"auto", "low", "high" or "original"`},
		{"phase bad", `{"model":"m","input":[{"role":"assistant","content":"x","phase":"draft"}]}`, "input[0].phase", `"commentary" or "final_answer"`},
		{"image unknown field", user(`[{"type":"input_image","image_url":"https://x","url":"y"}]`), "input[0].content[0].url", "unknown field"},
		{"function_call call_id missing", items(`{"type":"function_call","name":"f","arguments":"{}"}`), "input[0].call_id", "required"},
		{"function_call name missing", items(`{"type":"function_call","call_id":"c","arguments":"{}"}`), "input[0].name", "required"},
		{"function_call arguments missing", items(`{"type":"function_call","call_id":"c","name":"f"}`), "input[0].arguments", "required"},
		{"function_call arguments an object", items(`{"type":"function_call","call_id":"c","name":"f","arguments":{}}`), "input[0].arguments", "must be a string"},
		{"function_call unknown field", items(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}","role":"assistant"}`), "input[0].role", "unknown field"},
		{"function_call_output call_id missing", items(`{"type":"function_call_output","output":"x"}`), "input[0].call_id", "required"},
		{"function_call_output output missing", items(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c"}`), "input[1].output", "required"},
		{"function_call_output output a number", items(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":1}`), "input[1].output", "string or an array"},
		{"function_call_output image", items(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x"}]}`), "input[1].output[0].type", "not supported"},
		{"function_call_output without its call", items(`{"type":"function_call_output","call_id":"c9","output":"x"}`), "input[0].call_id", "no tool call found"},
		{"function_call_output before its call", items(`{"type":"function_call_output","call_id":"c","output":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`), "input[0].call_id", "no tool call found"},
		{"reasoning unknown field", items(`{"type":"reasoning","summary":[],"text":"x"},{"role":"user","content":"q"}`), "input[0].text", "unknown field"},
		{"instructions a number", base(`,"instructions":1`), "instructions", "must be a string"},
		{"max_output_tokens zero", base(`,"max_output_tokens":0`), "max_output_tokens", "from 1 to"},
		{"max_output_tokens fractional", base(`,"max_output_tokens":1.5`), "max_output_tokens", "must be an integer"},
		{"max_output_tokens string", base(`,"max_output_tokens":"5"`), "max_output_tokens", "must be an integer"},
		{"max_output_tokens huge", base(`,"max_output_tokens":1e300`), "max_output_tokens", "from 1 to"},
		{"temperature a string", base(`,"temperature":"0.5"`), "temperature", "must be a number"},
		{"temperature too high", base(`,"temperature":2.5`), "temperature", "from 0 to 2"},
		{"top_p too high", base(`,"top_p":1.1`), "top_p", "from 0 to 1"},
		{"top_p negative", base(`,"top_p":-0.1`), "top_p", "from 0 to 1"},
		{"tools an object", base(`,"tools":{}`), "tools", "array of tools"},
		{"tool not an object", base(`,"tools":[1]`), "tools[0]", "must be an object"},
		{"tool type missing", base(`,"tools":[{"name":"f"}]`), "tools[0].type", "required"},
		{"tool custom", base(`,"tools":[{"type":"custom","name":"apply_patch"}]`), "tools[0].type", "not supported"},
		{"namespace tool not a function", base(`,"tools":[{"type":"namespace","name":"ns","tools":[{"type":"web_search"}]}]`), "tools[0].tools[0].type", "only function tools"},
		{"namespace tool name repeated", base(`,"tools":[{"type":"function","name":"f"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]}]`), "tools[1].tools[0].name", "unique"},
		{"reasoning effort unknown", base(`,"reasoning":{"effort":"huge"}`), "reasoning.effort", "must be"},
		{"tool name missing", base(`,"tools":[{"type":"function"}]`), "tools[0].name", "required"},
		{"tool name bad", base(`,"tools":[{"type":"function","name":"a b"}]`), "tools[0].name", "letters, digits"},
		{"tool names repeated", base(`,"tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]`), "tools[1].name", "unique"},
		{"tool parameters not an object", base(`,"tools":[{"type":"function","name":"f","parameters":[]}]`), "tools[0].parameters", "schema object"},
		{"tool strict a string", base(`,"tools":[{"type":"function","name":"f","strict":"yes"}]`), "tools[0].strict", "boolean"},
		{"tool chat shape", base(`,"tools":[{"type":"function","function":{"name":"f"}}]`), "tools[0].function", "unknown field"},
		{"tool description a number", base(`,"tools":[{"type":"function","name":"f","description":1}]`), "tools[0].description", "must be a string"},
		{"tool_choice unknown string", base(tool + `,"tool_choice":"any"`), "tool_choice", `"auto", "none", "required"`},
		{"tool_choice required without tools", base(`,"tool_choice":"required"`), "tool_choice", "requires tools"},
		{"tool_choice a number", base(tool + `,"tool_choice":1`), "tool_choice", "string or an object"},
		{"tool_choice type missing", base(tool + `,"tool_choice":{"name":"f"}`), "tool_choice.type", "required"},
		{"tool_choice hosted", base(tool + `,"tool_choice":{"type":"web_search_preview"}`), "tool_choice.type", "not supported"},
		{"tool_choice allowed_tools", base(tool + `,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}`), "tool_choice.type", "not supported"},
		{"tool_choice function without name", base(tool + `,"tool_choice":{"type":"function"}`), "tool_choice.name", "required"},
		{"tool_choice unknown tool", base(tool + `,"tool_choice":{"type":"function","name":"g"}`), "tool_choice.name", "not one of the tools"},
		{"tool_choice function without tools", base(`,"tool_choice":{"type":"function","name":"g"}`), "tool_choice.name", "not one of the tools"},
		{"tool_choice chat shape", base(tool + `,"tool_choice":{"type":"function","function":{"name":"f"}}`), "tool_choice.function", "unknown field"},
		{"parallel_tool_calls a string", base(`,"parallel_tool_calls":"no"`), "parallel_tool_calls", "boolean"},
		{"text a string", base(`,"text":"json"`), "text", "must be an object"},
		{"text unknown field", base(`,"text":{"type":"text"}`), "text.type", "unknown field"},
		{"text verbosity bad", base(`,"text":{"verbosity":"loud"}`), "text.verbosity", "low"},
		{"text format type missing", base(`,"text":{"format":{}}`), "text.format.type", "required"},
		{"text format type bad", base(`,"text":{"format":{"type":"xml"}}`), "text.format.type", "json_schema"},
		{"text format text with extras", base(`,"text":{"format":{"type":"text","name":"x"}}`), "text.format.name", "unknown field"},
		{"text json_schema name missing", base(`,"text":{"format":{"type":"json_schema","schema":{}}}`), "text.format.name", "required"},
		{"text json_schema name bad", base(`,"text":{"format":{"type":"json_schema","name":"a.b","schema":{}}}`), "text.format.name", "letters, digits"},
		{"text json_schema schema missing", base(`,"text":{"format":{"type":"json_schema","name":"a"}}`), "text.format.schema", "required"},
		{"text json_schema schema a string", base(`,"text":{"format":{"type":"json_schema","name":"a","schema":"{}"}}`), "text.format.schema", "schema object"},
		{"text json_schema chat shape", base(`,"text":{"format":{"type":"json_schema","json_schema":{}}}`), "text.format.json_schema", "unknown field"},
		{"text json_schema strict a number", base(`,"text":{"format":{"type":"json_schema","name":"a","schema":{},"strict":1}}`), "text.format.strict", "boolean"},
		{"metadata not an object", base(`,"metadata":"x"`), "metadata", "must be an object"},
		{"metadata value a number", base(`,"metadata":{"a":"1","b":2}`), "metadata.b", "must be a string"},
		{"metadata too many", base(`,"metadata":{"a":"","b":"","c":"","d":"","e":"","f":"","g":"","h":"","i":"","j":"","k":"","l":"","m":"","n":"","o":"","p":"","q":""}`), "metadata", "at most 16"},
		{"metadata key too long", base(`,"metadata":{"` + strings.Repeat("k", 65) + `":"v"}`), "metadata.(unprintable)", "at most 64"},
		{"metadata value too long", base(`,"metadata":{"k":"` + strings.Repeat("v", 513) + `"}`), "metadata.k", "at most 512"},
		{"user a number", base(`,"user":1`), "user", "must be a string"},
		{"safety_identifier a number", base(`,"safety_identifier":1`), "safety_identifier", "must be a string"},
		{"stream a string", base(`,"stream":"true"`), "stream", "boolean"},
		{"store a string", base(`,"store":"false"`), "store", "boolean"},
		{"previous_response_id a number", base(`,"previous_response_id":1`), "previous_response_id", "must be a string"},
		{"previous_response_id empty", base(`,"previous_response_id":""`), "previous_response_id", "must not be empty"},
		{"background true", base(`,"background":true`), "background", "not supported"},
		{"background a string", base(`,"background":"no"`), "background", "boolean"},
		{"top_logprobs", base(`,"top_logprobs":5`), "top_logprobs", "not supported"},
		{"top_logprobs too many", base(`,"top_logprobs":50`), "top_logprobs", "from 0 to 20"},
		{"conversation", base(`,"conversation":"conv_1"`), "conversation", "previous_response_id"},
		{"prompt", base(`,"prompt":{"id":"pmpt_1"}`), "prompt", "not supported"},
		{"reasoning a string", base(`,"reasoning":"high"`), "reasoning", "must be an object"},
		{"reasoning unknown field", base(`,"reasoning":{"budget":1}`), "reasoning.budget", "unknown field"},
		{"reasoning effort a number", base(`,"reasoning":{"effort":1}`), "reasoning.effort", "must be a string"},
		{"truncation bad", base(`,"truncation":"middle"`), "truncation", `"auto" or "disabled"`},
		{"include a string", base(`,"include":"x"`), "include", "array of strings"},
		{"include element", base(`,"include":[1]`), "include[0]", "must be a string"},
		{"service_tier a number", base(`,"service_tier":1`), "service_tier", "must be a string"},
		{"prompt_cache_key a number", base(`,"prompt_cache_key":1`), "prompt_cache_key", "must be a string"},
		{"max_tool_calls negative", base(`,"max_tool_calls":-1`), "max_tool_calls", "from 0"},
		{"stream_options a bool", base(`,"stream_options":true`), "stream_options", "must be an object"},
		{"stream_options include_usage", base(`,"stream_options":{"include_usage":true}`), "stream_options.include_usage", "unknown field"},
		{"a name in another case", base(`,"Model":"m"`), "Model", "unknown field"},
		{"a member of another item type", base(`,"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","content":"x"}]`), "input[0].content", "unknown field"},
		{"unknown fields named in sorted order", base(`,"text":{"zeta":1,"alpha":2}`), "text.alpha", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ToHub([]byte(tt.in), nil)
			if err == nil {
				t.Fatalf("no error; got %s", r.Chat)
			}
			reqtest.CheckInvalid(t, err, tt.param, tt.msg)
		})
	}
}

// rsSeeds are the fuzz corpus's starting points.
var rsSeeds = []string{
	`{"model":"m","input":"hi"}`,
	`{"model":"m","instructions":"s","input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"low"}]}],"stream":true,"store":false,"metadata":{"k":"v"}}`,
	`{"model":"m","input":[{"role":"user","content":"q"},{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"a","annotations":[]},{"type":"refusal","refusal":"r"}]},{"type":"reasoning","id":"rs","summary":[]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"x\":1.50}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false}`,
	`{"model":"m:floor","input":"q","temperature":0.5,"top_p":0.9,"max_output_tokens":100,"user":"u","safety_identifier":"s","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object"},"strict":true},"verbosity":"low"},"gateway":{"retry":{"backoff":250}},"provider":{"sort":"price"}}`,
	`{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_1","output":"ok"}],"reasoning":{"effort":"low"},"include":["reasoning.encrypted_content"],"truncation":"auto","background":false}`,
	`{"model":"m","input":[{"type":"reasoning","summary":[]}],"instructions":"i","tool_choice":"none","text":{"format":{"type":"json_object"}}}`,
	`{"model":`, `[]`, `null`, `{}`,
}

// FuzzDecodeResponses checks that no body panics the decoder, that every
// failure is an invalid_request error naming its param (but for a body
// that is not a JSON object), and that every translation is a
// body llm.DecodeChatRequest accepts (but for the checks left to it: the
// model's length and the gateway and provider objects), with and without a
// prior conversation.
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range rsSeeds {
		f.Add([]byte(s))
	}
	prior := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"q"}`),
		json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`),
	}
	for _, b := range reqtest.AgentBodies(f, "codex") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ToHub(body, nil)
		if err != nil {
			reqtest.CheckNamesParam(t, err)
			return
		}
		check := func(chat []byte) {
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
		}
		for _, m := range r.Input {
			if !json.Valid(m) {
				t.Fatalf("invalid input message: %s", m)
			}
		}
		if r.Metadata != nil && !json.Valid(r.Metadata) {
			t.Fatalf("invalid metadata: %s", r.Metadata)
		}
		if r.PreviousResponseID == "" {
			if r.Chat == nil {
				t.Fatal("no Chat without a previous_response_id")
			}
			check(r.Chat)
			return
		}
		if r.Chat != nil {
			t.Fatalf("Chat %s before prior was loaded", r.Chat)
		}
		// The stand-in before the lookup is always a request, with the
		// settings of the whole one.
		pv, err := r.Preview()
		if err != nil {
			t.Fatalf("preview: %v", err)
		}
		check(pv.Bytes())
		if err := r.build(prior); err != nil {
			var e *llm.Error
			if !errors.As(err, &e) || e.Code != llm.CodeInvalidRequest {
				t.Fatalf("build: %v, want an invalid_request *llm.Error", err)
			}
			return
		}
		check(r.Chat)
		settings := func(chat []byte) string {
			req, err := llm.DecodeChatRequest(chat)
			if err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("%q %q %v %v %+v %+v %v", req.Model, req.Suffix, req.Stream, req.IncludeUsage, req.Gateway, req.Provider, req.Demand(llm.DataDemand(0)))
		}
		if a, b := settings(pv.Bytes()), settings(r.Chat); a != b {
			t.Fatalf("the preview's settings %s, the request's %s", a, b)
		}
	})
}
