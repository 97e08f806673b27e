package responses_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// seedEvents are real-shaped events for the fuzz targets' corpora.
func seedEvents() []string {
	seeds := []string{
		created, usage12, `{"type":"error","message":"x"}`, `{"type":"response.failed","response":{"error":{"message":"x"}}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","summary":[{"type":"summary_text","text":"a"}],"encrypted_content":"e"}}`,
		`{"type":"response.reasoning_summary_text.delta","item_id":"rs","output_index":0,"summary_index":1,"delta":"b"}`,
		`{"type":"response.image_generation_call.partial_image","partial_image_b64":"x"}`,
		`{"type":"response.output_text.delta","delta":"\ud800"}`, `{"type":"x.delta","delta":{}}`, `[]`, `null`, `{"type":7}`,
	}
	for _, e := range wireEvents {
		seeds = append(seeds, e.data)
	}
	for _, e := range []ev{msgAdded(0), textDelta(0, "Hi"), msgDone(0, "Hi"), callAdded(1, "fc", "call", "f"), argsDelta(1, "fc", "{}"),
		callDone(1, "fc", "call", "f", "{}"), completed(`[{"type":"message","content":[{"type":"output_text","text":"x"}]}]`, usage12), incomplete("content_filter", "null")} {
		seeds = append(seeds, e.data)
	}
	return seeds
}

// FuzzObserver: the observer never panics, hands every event on as it
// came, and reports a usage the pipeline can read.
func FuzzObserver(f *testing.F) {
	for _, s := range seedEvents() {
		f.Add("", s)
		f.Add("response.output_text.delta", s)
	}
	f.Fuzz(func(t *testing.T, name, data string) {
		var o responses.Observer
		c, err := o.Observe(name, []byte(data))
		if err != nil {
			return
		}
		if string(c.Raw) != data || c.Proto != llm.ProtoResponses {
			t.Fatalf("chunk %q (proto %v), want the data %q as it came", c.Raw, c.Proto, data)
		}
		if c.Usage != nil {
			b, err := c.Usage.MarshalJSON()
			if err != nil || !json.Valid(b) {
				t.Fatalf("usage %+v is not JSON: %q, %v", *c.Usage, b, err)
			}
			again, err := llm.ParseUsage(b)
			if err != nil || again.PromptTokens != c.Usage.PromptTokens || again.CompletionTokens != c.Usage.CompletionTokens || again.TotalTokens != c.Usage.TotalTokens {
				t.Fatalf("usage %s reads as %+v, %v; want %+v", b, again, err, *c.Usage)
			}
		}
		if (c.Finished != 0) != o.Done() || c.FinishReason != "" || (c.Text != "" && !c.Output) {
			t.Fatalf("finished %b (finish %q), Done %v, Text %q, Output %v", c.Finished, c.FinishReason, o.Done(), c.Text, c.Output)
		}
	})
}

// FuzzDecoder: the decoder never panics, and every chunk it makes, from
// any events, is a chunk llm.ParseChunk reads as the decoder did.
func FuzzDecoder(f *testing.F) {
	seeds := seedEvents()
	f.Add(strings.Join(seeds, "\n"))
	for _, s := range seeds {
		f.Add(created + "\n" + s + "\n" + s)
	}
	f.Fuzz(func(t *testing.T, events string) {
		d := responses.NewDecoder(1)
		for _, line := range strings.Split(events, "\n") {
			chunks, err := d.Decode("", []byte(line))
			for _, c := range chunks {
				if !json.Valid(c.Raw) {
					t.Fatalf("chunk %q is not JSON", c.Raw)
				}
				again, err := llm.ParseChunk(c.Raw)
				if err != nil || again.Output != c.Output || again.FinishReason != c.FinishReason || !reflect.DeepEqual(again.Usage, c.Usage) {
					t.Fatalf("chunk %s: %+v, parsed again %+v (%v)", c.Raw, c, again, err)
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// FuzzResponseEvents: any body becomes events whose data is JSON, or a
// failure; the events decode as any stream's.
func FuzzResponseEvents(f *testing.F) {
	f.Add(`{"id":"r","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"b"},{"type":"x"}]},` +
		`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"t"}]},` +
		`{"type":"web_search_call"}],"usage":{"input_tokens":1}}`)
	f.Add(`{"status":"incomplete","output":[]}`)
	f.Add(`{"status":"failed","error":{"message":"x"}}`)
	f.Add(`{"error":{"message":"x"}}`)
	f.Add(`{"status":"completed","output":[{"type":"message","content":"x"}]}`)
	f.Add(`{"status":"completed","output":[7]}`)
	f.Fuzz(func(t *testing.T, body string) {
		events, err := responses.ResponseEvents([]byte(body))
		if err != nil {
			return
		}
		d := responses.NewDecoder(1)
		var o responses.Observer
		for _, e := range events {
			if !json.Valid(e.Data) {
				t.Fatalf("event %s: data %q is not JSON", e.Name, e.Data)
			}
			if _, err := o.Observe(e.Name, e.Data); err != nil && e.Name != "error" && e.Name != "response.failed" {
				t.Fatalf("event %s %s: the observer fails: %v", e.Name, e.Data, err)
			}
			if _, err := d.Decode(e.Name, e.Data); err != nil && e.Name != "error" && e.Name != "response.failed" {
				t.Fatalf("event %s %s: the decoder fails: %v", e.Name, e.Data, err)
			}
		}
	})
}

// FuzzTranslateRequest: any body is translated into JSON, or refused.
func FuzzTranslateRequest(f *testing.F) {
	f.Add(chatBody(""))
	f.Add(`{"messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}},{"type":"file","file":{"file_id":"f"}}]},` +
		`{"role":"assistant","content":[{"type":"refusal","refusal":"r"}],"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}],` +
		`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}},` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{}}},"verbosity":"low","reasoning_effort":"high","max_tokens":5}`)
	f.Add(`{"messages":[{"role":"user","content":"x"}],"stop":"y"}`)
	f.Fuzz(func(t *testing.T, body string) {
		out, err := responses.EncodeRequest(&llm.UpstreamRequest{Model: "m", Body: []byte(body)})
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("translated %q into %q, not JSON", body, out)
		}
	})
}

// wireEvents is a Responses stream as a server writes it, with the
// oddities a reader must keep byte for byte: spacing, a member order of its
// own, unknown members, escapes, and an event without a name; a comment
// and an empty event in between carry nothing.
var wireEvents = []struct{ name, data string }{
	{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_7","object":"response","created_at":1700000007,"status":"in_progress","model":"gpt-5-2025","output":[],"usage":null,"x_vendor":{"a":[1,2]}}}`},
	{"response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_7","status":"in_progress"}}`},
	{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_7","type":"reasoning","summary":[]}}`},
	{"response.output_item.done", `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_7","type":"reasoning","summary":[],"encrypted_content":"gAAAAB7=="}}`},
	{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"msg_7","type":"message","status":"in_progress","content":[],"role":"assistant"}}`},
	{"", `{"sequence_number":5,"type":"response.content_part.added","item_id":"msg_7","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}`},
	{"response.output_text.delta", `{"type": "response.output_text.delta",  "sequence_number":6, "item_id":"msg_7","output_index":1,"content_index":0,"delta":"Bl\u00e9u <b>","logprobs":[]}`},
	{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_7","output_index":1,"content_index":0,"delta":".","obfuscation":"xyz"}`},
	{"response.output_text.done", `{"type":"response.output_text.done","sequence_number":8,"item_id":"msg_7","output_index":1,"content_index":0,"text":"Bléu <b>."}`},
	{"response.output_item.done", `{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"msg_7","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Bléu <b>."}],"role":"assistant"}}`},
	{"response.completed", `{"type":"response.completed","sequence_number":10,"response":{"id":"resp_7","object":"response","created_at":1700000007,"status":"completed","model":"gpt-5-2025","output":[],"usage":{"input_tokens":21,"input_tokens_details":{"cached_tokens":16},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":35},"total_tokens":61}}}`},
}
