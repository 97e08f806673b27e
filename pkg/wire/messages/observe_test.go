package messages

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

func TestObserver(t *testing.T) {
	var o Observer
	for _, tc := range []struct {
		name, data string
		output     bool
		finished   bool
		usage      string
	}{
		{"message_start", `{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":1}}}`, false, false, ""},
		{"ping", `{"type":"ping"}`, false, false, ""},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`, false, false, ""},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`, true, false, ""},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`, false, false, ""},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"Bash","input":{}}}`, true, false, ""},
		{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}`, true, false, ""},
		{"brand_new_event", `{"type":"brand_new_event"}`, false, false, ""},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`, false, true,
			`{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107,"prompt_tokens_details":{"cached_tokens":90}}`},
	} {
		c, err := o.Observe(tc.name, []byte(tc.data))
		if err != nil {
			t.Fatalf("%s: %v", tc.data, err)
		}
		if c.Proto != llm.ProtoMessages || c.Event != tc.name || string(c.Raw) != tc.data {
			t.Errorf("%s: the chunk does not carry the event as received: %+v", tc.data, c)
		}
		if c.Output != tc.output || (c.Finished == 1) != tc.finished || c.Seen != c.Finished || c.FinishReason != "" || !reflect.DeepEqual(c.Usage, llm.ReadUsage([]byte(tc.usage))) {
			t.Errorf("%s: output %v seen %b finished %b finish %q usage %+v; want %v, finished %v, %s", tc.data, c.Output, c.Seen, c.Finished, c.FinishReason, c.Usage, tc.output, tc.finished, tc.usage)
		}
	}
	if o.Done() {
		t.Error("done before message_stop")
	}
	if _, err := o.Observe("message_stop", []byte(`{"type":"message_stop"}`)); err != nil || !o.Done() {
		t.Errorf("message_stop: %v, done %v", err, o.Done())
	}
	var pe *llm.ProviderError
	if _, err := o.Observe("error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`)); !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != "busy" {
		t.Errorf("error event: %v", err)
	}
}

func TestNativeEvents(t *testing.T) {
	msg := `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"hi","citations":null}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":3,"output_tokens":2},"container":null}`
	evs, err := NativeEvents([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, string(e))
	}
	want := []string{
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2},"container":null}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"hm","signature":"s"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"hi","citations":null}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"input_tokens":3,"output_tokens":2}}`,
		`{"type":"message_stop"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzObserver: any event data is observed without a panic; what is not an
// event is a FailTransient error; a chunk always carries the data as given
// and a usage the pipeline can read.
func FuzzObserver(f *testing.F) {
	for _, s := range []string{
		`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-3}}`,
		`{"type":"error","error":{"message":""}}`, `[]`, `{"type":7}`, ``,
	} {
		f.Add("", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		var o Observer
		c, err := o.Observe(name, data)
		if err != nil {
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Class != llm.FailTransient {
				t.Fatalf("error %v is not a FailTransient ProviderError", err)
			}
			return
		}
		if string(c.Raw) != string(data) {
			t.Fatal("the chunk does not carry the data as given")
		}
		if c.Usage != nil {
			b, err := c.Usage.MarshalJSON()
			if err != nil || !json.Valid(b) {
				t.Fatalf("usage %+v: %q, %v", *c.Usage, b, err)
			}
			if again, err := llm.ParseUsage(b); err != nil || again.PromptTokens != c.Usage.PromptTokens || again.CompletionTokens != c.Usage.CompletionTokens {
				t.Fatalf("usage %s reads as %+v, %v", b, again, err)
			}
		}
	})
}

// FuzzNativeEvents: whatever a Message body, its events are JSON objects
// (or the body itself, for an error envelope) and never a panic.
func FuzzNativeEvents(f *testing.F) {
	f.Add([]byte(`{"type":"message","content":[{"type":"text","text":"a"}],"stop_reason":"end_turn","usage":{}}`))
	f.Add([]byte(`{"type":"error","error":{"message":"x"}}`))
	f.Add([]byte(`{"content":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := NativeEvents(body)
		if err != nil {
			return
		}
		for _, e := range evs {
			if !json.Valid(e) {
				t.Fatalf("event %q of %q is not JSON", e, body)
			}
		}
	})
}
