package responses_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

func translate(t *testing.T, body string) ([]byte, error) {
	t.Helper()
	return responses.EncodeRequest(&llm.UpstreamRequest{Model: "route-model", Body: []byte(body)})
}

// chatBody is a Chat Completions body with the messages of one user turn
// and extra top-level members (JSON, after a comma) as the gateway hands
// it to the adapter.
func chatBody(extra string) string {
	b := `{"model":"client-model","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

// responsesBody is the Responses body of chatBody("") with the members
// before "store" (JSON, after a comma).
func responsesBody(extra string) string {
	b := `{"model":"route-model","input":[{"type":"message","role":"user","content":"Hi"}]`
	if extra != "" {
		b += "," + extra
	}
	return b + `,"store":false,"stream":true}`
}

// TestTranslateRequest pins the translation field by field, byte for byte:
// the order of the members and the client's number text are part of it.
func TestTranslateRequest(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"minimal", chatBody(""), responsesBody("")},
		{"an object between spaces of any kind", "\f" + chatBody("") + "\u00a0", responsesBody("")},
		{"names read exactly", `{"model":"m","Model":"x","messages":[{"role":"user","content":"Hi","ROLE":"system"}],"MESSAGES":null}`,
			`{"model":"route-model","input":[{"type":"message","role":"user","content":"Hi"}],"store":false,"stream":true}`},
		{"system and developer messages become instructions, wherever they are",
			`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},` +
				`{"role":"developer","content":[{"type":"text","text":"Answer "},{"type":"text","text":"in French."}]}]}`,
			`{"model":"route-model","instructions":"Be brief.\n\nAnswer in French.","input":[{"type":"message","role":"user","content":"Hi"}],"store":false,"stream":true}`},
		{"user content parts",
			`{"messages":[{"role":"user","name":"ann","content":[{"type":"text","text":"What is this?"},` +
				`{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},` +
				`{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}},` +
				`{"type":"file","file":{"file_id":"file-1"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBE","filename":"a.pdf"}}]}]}`,
			`{"model":"route-model","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"What is this?"},` +
				`{"type":"input_image","image_url":"https://example.com/a.png","detail":"high"},` +
				`{"type":"input_image","image_url":"data:image/png;base64,iVBO","detail":"auto"},` +
				`{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}},` +
				`{"type":"input_file","file_id":"file-1"},{"type":"input_file","file_data":"data:application/pdf;base64,JVBE","filename":"a.pdf"}]}],"store":false,"stream":true}`},
		{"assistant text, refusal and tool calls; tool results",
			`{"messages":[{"role":"user","content":"Weather?"},` +
				`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"refusal","refusal":"Not that."}],` +
				`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
				`{"id":"call_2","function":{"name":"get_time","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"call_1","content":"18C"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"12:00"}]},` +
				`{"role":"assistant","content":"It is 18C.","refusal":null},{"role":"assistant","content":null,"refusal":"No more."}]}`,
			`{"model":"route-model","input":[{"type":"message","role":"user","content":"Weather?"},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."},{"type":"refusal","refusal":"Not that."}]},` +
				`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
				`{"type":"function_call","call_id":"call_2","name":"get_time","arguments":"{}"},` +
				`{"type":"function_call_output","call_id":"call_1","output":"18C"},{"type":"function_call_output","call_id":"call_2","output":"12:00"},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"It is 18C."}]},` +
				`{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"No more."}]}],"store":false,"stream":true}`},
		{"a user message's empty parts stay an array; null content is empty text",
			`{"messages":[{"role":"user","content":[]},{"role":"user","content":null}]}`,
			`{"model":"route-model","input":[{"type":"message","role":"user","content":[]},{"type":"message","role":"user","content":""}],"store":false,"stream":true}`},
		{"an assistant message with neither text nor calls is left out",
			`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":""},{"role":"assistant","content":[]}]}`,
			responsesBody("")},
		{"function tools, flattened; strict false unless set",
			chatBody(`"tools":[{"type":"function","function":{"name":"a","description":"Does a.","parameters":{"type":"object","properties":{"x":{"type":"string"}}},"strict":true}},` +
				`{"type":"function","function":{"name":"b"}}]`),
			responsesBody(`"tools":[{"type":"function","name":"a","description":"Does a.","parameters":{"type":"object","properties":{"x":{"type":"string"}}},"strict":true},` +
				`{"type":"function","name":"b","parameters":{"type":"object","properties":{}},"strict":false}]`)},
		{"tool_choice required", chatBody(`"tool_choice":"required"`), responsesBody(`"tool_choice":"required"`)},
		{"tool_choice none", chatBody(`"tool_choice":"none"`), responsesBody(`"tool_choice":"none"`)},
		{"tool_choice a function", chatBody(`"tool_choice":{"type":"function","function":{"name":"a"}}`), responsesBody(`"tool_choice":{"type":"function","name":"a"}`)},
		{"tool_choice allowed_tools",
			chatBody(`"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"a"}}]}}`),
			responsesBody(`"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"a"}]}`)},
		{"parallel_tool_calls", chatBody(`"parallel_tool_calls":false`), responsesBody(`"parallel_tool_calls":false`)},
		{"response_format json_schema",
			chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"answer","description":"The answer.","schema":{"type":"object"},"strict":true}}`),
			responsesBody(`"text":{"format":{"type":"json_schema","name":"answer","description":"The answer.","schema":{"type":"object"},"strict":true}}`)},
		{"response_format json_object, and verbosity", chatBody(`"response_format":{"type":"json_object"},"verbosity":"low"`),
			responsesBody(`"text":{"format":{"type":"json_object"},"verbosity":"low"}`)},
		{"response_format text", chatBody(`"response_format":{"type":"text"}`), responsesBody(`"text":{"format":{"type":"text"}}`)},
		{"verbosity alone", chatBody(`"verbosity":"high"`), responsesBody(`"text":{"verbosity":"high"}`)},
		{"reasoning_effort", chatBody(`"reasoning_effort":"minimal"`), responsesBody(`"reasoning":{"effort":"minimal"}`)},
		{"max_completion_tokens before max_tokens", chatBody(`"max_tokens":50,"max_completion_tokens":2000`), responsesBody(`"max_output_tokens":2000`)},
		{"max_tokens", chatBody(`"max_tokens":50`), responsesBody(`"max_output_tokens":50`)},
		{"sampling, the client's number text kept", chatBody(`"temperature":0.70,"top_p":1e-1`), responsesBody(`"temperature":0.70,"top_p":1e-1`)},
		{"the fields Responses shares",
			chatBody(`"user":"u-1","safety_identifier":"s-1","prompt_cache_key":"k-1","prompt_cache_retention":"24h","service_tier":"flex","metadata":{"a":"b"}`),
			responsesBody(`"user":"u-1","safety_identifier":"s-1","prompt_cache_key":"k-1","prompt_cache_retention":"24h","service_tier":"flex","metadata":{"a":"b"}`)},
		{"hints dropped, and the defaults of what is refused otherwise",
			chatBody(`"seed":7,"prediction":{"type":"content","content":"x"},"store":true,"top_k":40,"n":1,"logprobs":false,"top_logprobs":0,` +
				`"stop":[],"frequency_penalty":0,"presence_penalty":0.0,"logit_bias":{},"modalities":["text"],"audio":null,"functions":null`),
			responsesBody("")},
		{"keys are read exactly as written",
			`{"Messages":[{"role":"user","content":"shadow"}],"messages":[{"role":"user","content":"Hi","Content":"shadow"}],"Temperature":2}`,
			responsesBody("")},
		{"null members are absent", chatBody(`"temperature":null,"tools":null,"tool_choice":null,"response_format":null,"max_tokens":null`), responsesBody("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := translate(t, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("translated to\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("not valid JSON: %s", got)
			}
		})
	}
}

// TestTranslateRequestRefuses: what Responses cannot express and what
// would change the answer is refused, naming the field, as the upstream's
// own 400 would be.
func TestTranslateRequestRefuses(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"n", chatBody(`"n":2`), "n:"},
		{"logprobs", chatBody(`"logprobs":true`), "logprobs:"},
		{"top_logprobs", chatBody(`"top_logprobs":3`), "top_logprobs:"},
		{"stop, a string", chatBody(`"stop":"END"`), "stop:"},
		{"stop, a list", chatBody(`"stop":["a","b"]`), "stop:"},
		{"frequency_penalty", chatBody(`"frequency_penalty":0.5`), "frequency_penalty:"},
		{"presence_penalty", chatBody(`"presence_penalty":-1`), "presence_penalty:"},
		{"logit_bias", chatBody(`"logit_bias":{"50256":-100}`), "logit_bias:"},
		{"audio output", chatBody(`"modalities":["text","audio"]`), "modalities:"},
		{"audio", chatBody(`"audio":{"voice":"alloy","format":"wav"}`), "audio:"},
		{"functions", chatBody(`"functions":[{"name":"f"}]`), "functions:"},
		{"function_call", chatBody(`"function_call":"auto"`), "function_call:"},
		{"web_search_options", chatBody(`"web_search_options":{}`), "web_search_options:"},
		{"a custom tool", chatBody(`"tools":[{"type":"custom","custom":{"name":"x"}}]`), `tools[0].type "custom"`},
		{"tools not a list", chatBody(`"tools":{"type":"function"}`), "tools must be an array"},
		{"a tool without a name", chatBody(`"tools":[{"type":"function","function":{}}]`), "tools[0].function.name is required"},
		{"tool_choice of another kind", chatBody(`"tool_choice":{"type":"custom","custom":{"name":"x"}}`), "tool_choice must be"},
		{"tool_choice an unknown string", chatBody(`"tool_choice":"any"`), `tool_choice "any"`},
		{"response_format of another kind", chatBody(`"response_format":{"type":"grammar"}`), `response_format type "grammar"`},
		{"json_schema without a name", chatBody(`"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`), "response_format.json_schema.name is required"},
		{"the function role", `{"messages":[{"role":"function","name":"f","content":"x"}]}`, `messages[0].role "function"`},
		{"a role of no kind", `{"messages":[{"content":"x"}]}`, `messages[0].role ""`},
		{"a message that is not an object", `{"messages":["hi"]}`, "messages[0] must be an object"},
		{"messages not a list", `{"messages":{}}`, "messages must be an array"},
		{"no messages", `{"model":"m"}`, "messages must be an array"},
		{"only a system message", `{"messages":[{"role":"system","content":"x"}]}`, "at least one user, assistant or tool message"},
		{"a user part of another kind", `{"messages":[{"role":"user","content":[{"type":"video_url"}]}]}`, `messages[0].content[0]: content part type "video_url"`},
		{"an image without a url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url is required"},
		{"a file without an id or data", `{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a"}}]}]}`, "messages[0].content[0].file needs"},
		{"an image in a system message", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]},{"role":"user","content":"Hi"}]}`, "messages[0].content[0]: this message may only hold text"},
		{"an image in an assistant message", `{"messages":[{"role":"assistant","content":[{"type":"image_url"}]}]}`, `messages[0].content[0]: content part type "image_url"`},
		{"content of a wrong type", `{"messages":[{"role":"user","content":7}]}`, "messages[0].content must be"},
		{"a tool message without its call", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id is required"},
		{"a tool call of another kind", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{}}]}]}`, `messages[0].tool_calls[0].type "custom"`},
		{"a tool call without a name", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{}}]}]}`, "messages[0].tool_calls[0] needs an id and a function name"},
		{"not an object", `[]`, "the request body is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := translate(t, tt.in)
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("translated to %s (error %v), want a refusal", got, err)
			}
			if pe.Class != llm.FailRejected || pe.Status != 0 || !strings.Contains(pe.Message, tt.want) {
				t.Errorf("%v (class %v, status %d), want FailRejected, no status, a message with %q", pe, pe.Class, pe.Status, tt.want)
			}
		})
	}
}

// TestTranslateRequestSameMembers: two bodies with the same members in
// another order go out the same, so one Idempotency-Key fingerprint sends
// one request.
func TestTranslateRequestSameMembers(t *testing.T) {
	a := `{"model":"m","temperature":0.5,"messages":[{"role":"system","content":"S"},{"content":"Hi","role":"user"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"b":1,"a":2}}}]}`
	b := `{"tools":[{"function":{"parameters":{"b":1,"a":2},"name":"f"},"type":"function"}],"messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}],"temperature":0.5,"model":"m"}`
	ga, err := translate(t, a)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := translate(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(ga), string(gb)); diff != "" {
		t.Errorf("(-first +second):\n%s", diff)
	}
}

// TestDroppedFields: each of DroppedFields, set, is left out (the gateway
// names it in x-gateway-dropped): the request goes out as it would
// without it, and is not refused.
func TestDroppedFields(t *testing.T) {
	values := map[string]string{"seed": "7", "prediction": `{"type":"content","content":"x"}`, "store": "true", "top_k": "40"}
	for _, f := range responses.DroppedFields {
		t.Run(f, func(t *testing.T) {
			v, ok := values[f]
			if !ok {
				t.Fatalf("no test value for %s", f)
			}
			got, err := translate(t, chatBody(`"`+f+`":`+v))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != responsesBody("") {
				t.Errorf("translated to\n%s\nwant\n%s", got, responsesBody(""))
			}
		})
	}
}
