package responses

import (
	"bytes"
	"encoding/json"
	"testing"
)

func str(s string) *string { return &s }

// TestRequestEncoding pins what a written request reads as: members in
// OpenAI's order, raw members as given, unset ones left out.
func TestRequestEncoding(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   any
		want string
	}{
		{"minimal", Request{Model: "m", Input: []any{InputMessage{Type: ItemMessage, Role: RoleUser, Content: "Hi"}}, Stream: true},
			`{"model":"m","input":[{"type":"message","role":"user","content":"Hi"}],"store":false,"stream":true}`},
		{"every member", Request{
			Model: "m", Instructions: "Be brief.", Input: []any{}, Tools: []FunctionTool{{Type: ToolFunction, Name: "f", Parameters: json.RawMessage(`{}`), Strict: json.RawMessage(`false`)}},
			ToolChoice: "auto", ParallelToolCalls: json.RawMessage(`true`), Text: &Text{Format: &TextFormat{Type: FormatJSONObject}, Verbosity: json.RawMessage(`"low"`)},
			Reasoning: &Reasoning{Effort: json.RawMessage(`"low"`)}, MaxOutputTokens: json.RawMessage(`10`), Temperature: json.RawMessage(`0.70`),
			TopP: json.RawMessage(`1e-1`), User: json.RawMessage(`"u"`), SafetyIdentifier: json.RawMessage(`"s"`), PromptCacheKey: json.RawMessage(`"k"`),
			PromptCacheRetention: json.RawMessage(`"24h"`), ServiceTier: json.RawMessage(`"flex"`), Metadata: json.RawMessage(`{"a":"b"}`), Store: true, Stream: true},
			`{"model":"m","instructions":"Be brief.","input":[],"tools":[{"type":"function","name":"f","parameters":{},"strict":false}],"tool_choice":"auto",` +
				`"parallel_tool_calls":true,"text":{"format":{"type":"json_object"},"verbosity":"low"},"reasoning":{"effort":"low"},"max_output_tokens":10,` +
				`"temperature":0.70,"top_p":1e-1,"user":"u","safety_identifier":"s","prompt_cache_key":"k","prompt_cache_retention":"24h","service_tier":"flex",` +
				`"metadata":{"a":"b"},"store":true,"stream":true}`},
		{"input parts", InputMessage{Type: ItemMessage, Role: RoleUser, Content: []InputPart{
			{Type: PartInputText, Text: str("")}, {Type: PartInputImage, ImageURL: "https://x", Detail: "auto"},
			{Type: PartInputFile, FileID: json.RawMessage(`"file-1"`)}, {Type: PartInputAudio, InputAudio: json.RawMessage(`{"data":"UklG"}`)},
			{Type: PartOutputText, Text: str("a")}, {Type: PartRefusal, Refusal: str("no")}}},
			`{"type":"message","role":"user","content":[{"type":"input_text","text":""},{"type":"input_image","image_url":"https://x","detail":"auto"},` +
				`{"type":"input_file","file_id":"file-1"},{"type":"input_audio","input_audio":{"data":"UklG"}},{"type":"output_text","text":"a"},{"type":"refusal","refusal":"no"}]}`},
		{"function call", FunctionCall{Type: ItemFunctionCall, CallID: "call_1", Name: "f", Arguments: "{}"},
			`{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"}`},
		{"function call output", FunctionCallOutput{Type: ItemFunctionCallOutput, CallID: "call_1", Output: ""},
			`{"type":"function_call_output","call_id":"call_1","output":""}`},
		{"a tool with a description and no schema", FunctionTool{Type: ToolFunction, Name: "f", Description: str("")},
			`{"type":"function","name":"f","description":""}`},
		{"allowed tools", AllowedTools{Type: ToolAllowedTools, Mode: "auto", Tools: []NamedTool{{Type: ToolFunction, Name: "f"}}},
			`{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"}]}`},
		{"json_schema format", TextFormat{Type: FormatJSONSchema, Name: "a", Schema: json.RawMessage(`{"type":"object"}`), Strict: json.RawMessage(`true`)},
			`{"type":"json_schema","name":"a","schema":{"type":"object"},"strict":true}`},
		{"verbosity alone", Text{Verbosity: json.RawMessage(`"high"`)}, `{"verbosity":"high"}`},
		{"reasoning with a summary", Reasoning{Effort: json.RawMessage(`"medium"`), Summary: "detailed"}, `{"effort":"medium","summary":"detailed"}`},
	} {
		got, err := json.Marshal(tt.in)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// FuzzRequest checks that a request read from any bytes writes the same
// bytes once read back: the types lose nothing they read.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":[{"type":"message","role":"user","content":"Hi"}],"store":false,"stream":true}`,
		`{"model":"m","instructions":"x","tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}],` +
			`"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"a","schema":{}},"verbosity":"low"},` +
			`"reasoning":{"effort":"high","summary":"auto"},"temperature":1,"metadata":{}}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Request
		if json.Unmarshal(data, &r) != nil {
			return
		}
		once, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("Marshal(%s): %v", data, err)
		}
		var again Request
		if err := json.Unmarshal(once, &again); err != nil {
			t.Fatalf("Unmarshal(%s): %v", once, err)
		}
		twice, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Errorf("read back:\n%s\n%s", once, twice)
		}
	})
}

// TestEventEncoding pins what the stream events write: their members in
// OpenAI's order, the head and the place of the item first.
func TestEventEncoding(t *testing.T) {
	head := EventHead{Type: "t", SequenceNumber: 3}
	at := ItemAt{ItemID: "msg_1", OutputIndex: 1}
	for _, tt := range []struct {
		ev   any
		want string
	}{
		{ResponseEvent{EventHead: head}, `{"type":"t","sequence_number":3,"response":null}`},
		{OutputItemEvent{EventHead: head, OutputIndex: 2, Item: 1}, `{"type":"t","sequence_number":3,"output_index":2,"item":1}`},
		{ContentPartEvent{EventHead: head, PartAt: PartAt{at, 4}, Part: 1}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":4,"part":1}`},
		{OutputTextDeltaEvent{EventHead: head, PartAt: PartAt{at, 4}, Delta: "d", Logprobs: []json.RawMessage{}}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":4,"delta":"d","logprobs":[]}`},
		{OutputTextDoneEvent{EventHead: head, PartAt: PartAt{at, 4}, Text: "x"}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":4,"text":"x","logprobs":null}`},
		{RefusalDeltaEvent{EventHead: head, PartAt: PartAt{at, 4}, Delta: "d"}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":4,"delta":"d"}`},
		{RefusalDoneEvent{EventHead: head, PartAt: PartAt{at, 4}, Refusal: "r"}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":4,"refusal":"r"}`},
		{ArgumentsDeltaEvent{EventHead: head, ItemAt: at, Delta: "d"}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"delta":"d"}`},
		{ArgumentsDoneEvent{EventHead: head, ItemAt: at, Arguments: "{}"}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"arguments":"{}"}`},
		{SummaryPartEvent{EventHead: head, SummaryAt: SummaryAt{at, 5}, Part: SummaryText{Type: "summary_text"}}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"summary_index":5,"part":{"type":"summary_text","text":""}}`},
		{SummaryTextDeltaEvent{EventHead: head, SummaryAt: SummaryAt{at, 5}, Delta: "d"}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"summary_index":5,"delta":"d"}`},
		{SummaryTextDoneEvent{EventHead: head, SummaryAt: SummaryAt{at, 5}, Text: "x"}, `{"type":"t","sequence_number":3,"item_id":"msg_1","output_index":1,"summary_index":5,"text":"x"}`},
	} {
		got, err := json.Marshal(tt.ev)
		if err != nil || string(got) != tt.want {
			t.Errorf("%T: got %s (%v), want %s", tt.ev, got, err, tt.want)
		}
	}
}
