package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestEventReader(t *testing.T) {
	for _, tt := range []struct {
		name, sse, data string
		want            EventView
		err             error
	}{
		{"a delta", "", `{"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_1","output_index":1,"content_index":0,"delta":" world","logprobs":[]}`,
			EventView{Type: EventOutputTextDelta, ItemID: raw(`"msg_1"`), OutputIndex: raw(`1`), Delta: raw(`" world"`)}, nil},
		{"white space, and a key given twice: the last counts", "", " {\n \"type\" : \"x\" , \"delta\":{\"a\": [1, 2]},\"type\":\"response.completed\",\"response\":{}} \n",
			EventView{Type: EventCompleted, Delta: raw(`{"a": [1, 2]}`), Response: raw(`{}`)}, nil},
		{"an escaped key", "", `{"typ\u0065":"error","m\u0065ssage":"x","error":null}`,
			EventView{Type: EventError, Message: raw(`"x"`), Error: raw(`null`)}, nil},
		{"keys match exactly", "", `{"Type":"error","type":"response.queued"}`, EventView{Type: EventQueued}, nil},
		{"a type this package does not name", "", `{"type":"response.x"}`, EventView{Type: "response.x"}, nil},
		{"no type: the SSE name", "response.in_progress", `{"response":null}`, EventView{Type: EventInProgress, Response: raw(`null`)}, nil},
		{"a null type: the SSE name", "error", `{"type":null}`, EventView{Type: EventError}, nil},
		{"summary and arguments", "", `{"summary_index":2,"arguments":"{}","item":{"type":"message"}}`,
			EventView{SummaryIndex: raw(`2`), Arguments: raw(`"{}"`), Item: raw(`{"type":"message"}`)}, nil},
		{"invalid UTF-8 in a string", "", "{\"delta\":\"\xff\"}", EventView{Delta: raw("\"\xff\"")}, nil},
		{"a type that is not a string", "", `{"type":7}`, EventView{}, ErrTypeNotText},
		{"not an object", "", `[1,2]`, EventView{}, ErrNotEvent},
		{"null", "", `null`, EventView{}, ErrNotEvent},
		{"empty", "", ``, EventView{}, ErrNotEvent},
		{"cut short", "", `{"type":"response.output_text.delta","delta":"wor`, EventView{}, ErrNotEvent},
		{"two objects", "", `{} {}`, EventView{}, ErrNotEvent},
		{"trailing bytes", "", `{}x`, EventView{}, ErrNotEvent},
	} {
		var r EventReader
		got, err := r.Read(tt.sse, []byte(tt.data))
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// TestEventReaderShares: the members are the data's own bytes, and one
// reader reads event after event.
func TestEventReaderShares(t *testing.T) {
	var r EventReader
	for _, data := range []string{`{"delta":"a"}`, `{"delta":"bc"}`} {
		b := []byte(data)
		ev, err := r.Read("", b)
		if err != nil {
			t.Fatal(err)
		}
		if &ev.Delta[0] != &b[9] {
			t.Errorf("%s: delta %s is a copy", data, ev.Delta)
		}
	}
}

// FuzzEventReader checks the reader against encoding/json: it takes
// exactly the JSON objects, and reads each member it names as the last
// member of that key, as written.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}], "d":"x\"y", "e":null,"f":-1.5e3, "g":{"h":[]}} `,
		`{"typ\u0065":"response.created","type":"x","type":"y"}`, `{"a":"\\"}`, `{"a":[[[]]],"b":true,"c":false}`,
		"{\"\x92\":\"\"}", `{"type":"response.output_text.delta","delta":"\ud800"}`, `{"type":7}`, `[]`, `null`,
		`{"type":"response.completed","response":{"output":[{"type":"message"}]},"item_id":"x","output_index":0,"summary_index":1,"item":{},"arguments":"","message":"m","error":{}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		var r EventReader
		b := []byte(data)
		ev, err := r.Read("sse", b)
		var m map[string]json.RawMessage
		if !json.Valid(b) || json.Unmarshal(b, &m) != nil || m == nil {
			if err == nil {
				t.Fatalf("Read(%q) took data that is not an object", data)
			}
			return
		}
		typ := m["type"]
		if len(typ) > 0 && typ[0] != '"' && string(typ) != "null" {
			if !errors.Is(err, ErrTypeNotText) {
				t.Fatalf("Read(%q): %v, want ErrTypeNotText", data, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Read(%q): %v", data, err)
		}
		want := EventView{Type: String(typ)}
		if want.Type == "" {
			want.Type = "sse"
		}
		for key, field := range map[string]*json.RawMessage{
			"output_index": &want.OutputIndex, "summary_index": &want.SummaryIndex, "item_id": &want.ItemID, "item": &want.Item,
			"delta": &want.Delta, "arguments": &want.Arguments, "response": &want.Response, "message": &want.Message, "error": &want.Error,
		} {
			if v, ok := m[key]; ok {
				*field = v
			}
		}
		if !equalViews(ev, want) {
			t.Fatalf("Read(%q):\n got %+v\nwant %+v", data, ev, want)
		}
	})
}

func TestReadItem(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      ItemView
		err       error
	}{
		{"a message", `{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hi"},{"type":"refusal","refusal":""}],"role":"assistant"}`,
			ItemView{Type: ItemMessage, ID: "msg_1", Content: []PartView{{Type: PartOutputText, Text: "Hi", RawText: raw(`"Hi"`)}, {Type: PartRefusal, RawRefusal: raw(`""`)}}}, nil},
		{"a function call", `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"f"}`,
			ItemView{Type: ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "f", Arguments: "{}"}, nil},
		{"arguments as an object", `{"type":"function_call","arguments":{"a":1}}`, ItemView{Type: ItemFunctionCall, Arguments: `{"a":1}`}, nil},
		{"a reasoning item", `{"type":"reasoning","summary":[{"type":"summary_text","text":"a\u0062"}],"content":null,"encrypted_content":"e"}`,
			ItemView{Type: ItemReasoning, EncryptedContent: "e", Summary: []PartView{{Type: PartSummaryText, Text: "ab", RawText: raw(`"a\u0062"`)}}}, nil},
		{"members of the wrong type read as absent", `{"type":"web_search_call","id":7,"name":[],"content":"x"}`, ItemView{Type: "web_search_call"}, nil},
		{"not an object", `[]`, ItemView{}, ErrItem},
		{"a message's parts that are not a list", `{"type":"message","content":"x"}`, ItemView{}, ErrParts},
		{"a part that is not an object", `{"type":"reasoning","summary":["x"]}`, ItemView{}, ErrPart},
	} {
		got, err := ReadItem(raw(tt.raw))
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestHasOutput(t *testing.T) {
	for raw, want := range map[string]bool{
		`{}`:                              false,
		`{"type":"message","content":[]}`: false,
		`{"type":"message","content":[{"type":"output_text","text":"a"}]}`:      true,
		`{"type":"message","content":[{"type":"refusal","refusal":"a"}]}`:       true,
		`{"type":"reasoning","summary":[{"type":"summary_text","text":""}]}`:    false,
		`{"type":"reasoning","summary":[],"encrypted_content":"e"}`:             true,
		`{"type":"reasoning","content":[{"type":"reasoning_text","text":"t"}]}`: true,
		`{"type":"function_call"}`:   true,
		`{"type":"web_search_call"}`: true,
	} {
		it, err := ReadItem(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := it.HasOutput(); got != want {
			t.Errorf("%s: HasOutput %v, want %v", raw, got, want)
		}
	}
}

func TestReadResponse(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		output    bool
		want      ResponseView
		err       error
	}{
		{"complete", `{"id":"resp_1","object":"response","created_at":1700000000,"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"},` +
			`"model":"m","output":[{"type":"message"}],"usage":{"input_tokens":1}}`, true,
			ResponseView{ID: "resp_1", Model: "m", CreatedAt: 1700000000, Status: StatusIncomplete, HasStatus: true, IncompleteReason: ReasonMaxOutputTokens,
				Usage: raw(`{"input_tokens":1}`), Output: []json.RawMessage{raw(`{"type":"message"}`)}, RawOutput: raw(`[{"type":"message"}]`)}, nil},
		{"output left unread", `{"output":{}}`, false, ResponseView{RawOutput: raw(`{}`)}, nil},
		{"failed", `{"status":"failed","error":{"code":"server_error","message":"boom"}}`, false,
			ResponseView{Status: StatusFailed, HasStatus: true, HasErr: true, ErrorMessage: "boom", ErrorCode: "server_error"}, nil},
		{"an error given as a string", `{"error":"boom"}`, false, ResponseView{HasErr: true, ErrorMessage: "boom"}, nil},
		{"members of the wrong type", `{"id":1,"created_at":-1,"usage":[],"status":null}`, false, ResponseView{HasStatus: true}, nil},
		{"a creation time past 2^53", `{"created_at":1e16}`, false, ResponseView{}, nil},
		{"not an object", `"x"`, false, ResponseView{}, ErrResponse},
		{"output not a list", `{"output":{}}`, true, ResponseView{}, ErrOutputNoList},
	} {
		got, err := ReadResponse(raw(tt.raw), tt.output)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestScalars(t *testing.T) {
	for raw, want := range map[string]string{`"a"`: "a", `"a\"b"`: `a"b`, `7`: "", `null`: "", ``: "", `"`: "", "\"\xff\"": "\ufffd"} {
		if got := String(json.RawMessage(raw)); got != want {
			t.Errorf("String(%q) = %q, want %q", raw, got, want)
		}
	}
	for raw, want := range map[string]int{`0`: 0, `12`: 12, `-1`: -1, `1.5`: -1, `"1"`: -1, ``: -1} {
		if got := Index(json.RawMessage(raw)); got != want {
			t.Errorf("Index(%q) = %d, want %d", raw, got, want)
		}
	}
}

// equalViews compares the members' bytes: nil and empty alike.
func equalViews(a, b EventView) bool {
	return a.Type == b.Type && bytes.Equal(a.OutputIndex, b.OutputIndex) && bytes.Equal(a.SummaryIndex, b.SummaryIndex) &&
		bytes.Equal(a.ItemID, b.ItemID) && bytes.Equal(a.Item, b.Item) && bytes.Equal(a.Delta, b.Delta) &&
		bytes.Equal(a.Arguments, b.Arguments) && bytes.Equal(a.Response, b.Response) && bytes.Equal(a.Message, b.Message) &&
		bytes.Equal(a.Error, b.Error)
}

// BenchmarkEventReader is the cost of reading the commonest event of a
// stream passed through.
func BenchmarkEventReader(b *testing.B) {
	data := []byte(`{"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","output_index":1,"content_index":0,"delta":" world","logprobs":[],"obfuscation":"eOLpuv7AxKf"}`)
	var r EventReader
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Read(EventOutputTextDelta, data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFailureMessage(t *testing.T) {
	for _, tt := range []struct{ data, want string }{
		{`{"type":"error","code":"server_error","message":"boom","param":null}`, "boom"},
		{`{"type":"error","error":{"type":"server_error","message":"nested"}}`, "nested"},
		{`{"type":"error","message":"","error":"as a string"}`, "as a string"},
		{`{"type":"error","message":7,"error":null}`, ""},
		{`{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"failed"}}}`, "failed"},
		{`{"type":"response.failed","response":[]}`, ""},
		{`{"type":"response.completed","message":"not a failure"}`, ""},
	} {
		var r EventReader
		ev, err := r.Read("", []byte(tt.data))
		if err != nil {
			t.Fatal(err)
		}
		if got := FailureMessage(&ev); got != tt.want {
			t.Errorf("FailureMessage(%s) = %q, want %q", tt.data, got, tt.want)
		}
	}
}
