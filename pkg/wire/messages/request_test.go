package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// TestRequestRoundTrip decodes requests and encodes them back: each row
// says what the types read, and the encoding keeps every member, the ones
// they do not model included (in Extra, after the modelled ones).
func TestRequestRoundTrip(t *testing.T) {
	tests := []struct {
		name, in string
		check    func(t *testing.T, r *Request)
		want     string // the encoding; in when empty
	}{{
		name: "minimal, content a string",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		check: func(t *testing.T, r *Request) {
			if r.Model != "m" || *r.MaxTokens != 5 || !r.Stream || len(r.Messages) != 1 ||
				r.Messages[0].Content.Text != "hi" || r.Messages[0].Content.Blocks != nil {
				t.Errorf("%+v", r)
			}
		},
	}, {
		name: "system blocks, content blocks of every type, cache_control",
		in: `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"a","citations":[{"type":"char_location"}]},` +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},` +
			`{"type":"image","source":{"type":"url","url":"https://x/y.png"}},` +
			`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"},"title":"t","context":"c"}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"eA=="},` +
			`{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":true},` +
			`{"type":"tool_result","tool_use_id":"t2","content":""}]}],"stream":false}`,
		check: func(t *testing.T, r *Request) {
			sys := r.System.Blocks
			if len(sys) != 1 || sys[0].CacheControl == nil || sys[0].CacheControl.TTL != "1h" {
				t.Errorf("system %+v", r.System)
			}
			user := r.Messages[0].Content.Blocks
			if user[1].Source.MediaType != "image/png" || user[2].Source.URL != "https://x/y.png" || user[3].Title != "t" ||
				string(user[0].Citations) != `[{"type":"char_location"}]` {
				t.Errorf("user %+v", user)
			}
			asst := r.Messages[1].Content.Blocks
			if asst[0].Signature != "sig" || asst[1].Data != "eA==" || string(asst[2].Input) != `{"a":1}` {
				t.Errorf("assistant %+v", asst)
			}
			res := r.Messages[2].Content.Blocks
			if res[0].ToolUseID != "t1" || res[0].IsError == nil || !*res[0].IsError || len(res[0].Content.Blocks) != 1 ||
				res[1].Content == nil || res[1].Content.Text != "" {
				t.Errorf("tool results %+v", res)
			}
		},
	}, {
		name: "tools, tool_choice, metadata, thinking, output_config, sampling as written",
		in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"stream":false,"temperature":0.70,"top_p":1.0,"top_k":40,` +
			`"stop_sequences":["END"],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"},"strict":true,"cache_control":{"type":"ephemeral"}},` +
			`{"type":"web_search_20250305","name":"web_search","max_uses":5}],"tool_choice":{"disable_parallel_tool_use":true,"name":"f","type":"tool"},` +
			`"metadata":{"user_id":"u"},"thinking":{"type":"enabled","budget_tokens":2048},"output_config":{"effort":"high","format":{"type":"json_schema","schema":{"type":"object"}}}}`,
		check: func(t *testing.T, r *Request) {
			if string(r.Temperature) != "0.70" || string(r.TopP) != "1.0" || string(r.TopK) != "40" {
				t.Errorf("sampling %s %s %s", r.Temperature, r.TopP, r.TopK)
			}
			if !r.Tools[0].Custom() || r.Tools[1].Custom() || string(r.Tools[1].Extra) != `{"max_uses":5}` {
				t.Errorf("tools %+v", r.Tools)
			}
			if r.ToolChoice.Type != ToolChoiceTool || !r.ToolChoice.DisableParallelToolUse || r.Metadata.UserID != "u" ||
				*r.Thinking.BudgetTokens != 2048 || r.OutputConfig.Effort != "high" || string(r.OutputConfig.Format.Schema) != `{"type":"object"}` {
				t.Errorf("%+v", r)
			}
		},
	}, {
		name: "members not modelled kept at every level, in body order; a source may be a string",
		in: `{"service_tier":"auto","model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result","text":"a","source":"s?","x":1}],"y":2}],` +
			`"gateway":{"retry":{"max_attempts_per_route":2}},"stream":true}`,
		check: func(t *testing.T, r *Request) {
			if string(r.Extra) != `{"service_tier":"auto","gateway":{"retry":{"max_attempts_per_route":2}}}` ||
				string(r.Messages[0].Extra) != `{"y":2}` {
				t.Errorf("extra %s, %s", r.Extra, r.Messages[0].Extra)
			}
		},
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result","text":"a","source":"s?","x":1}],"y":2}],` +
			`"stream":true,"service_tier":"auto","gateway":{"retry":{"max_attempts_per_route":2}}}`,
	}, {
		name: "null members read as absent",
		in:   `{"model":"m","max_tokens":5,"system":null,"messages":[{"role":"user","content":null}],"tool_choice":null,"stream":false}`,
		check: func(t *testing.T, r *Request) {
			if r.System.Blocks != nil || r.Messages[0].Content.Blocks != nil || r.ToolChoice != nil {
				t.Errorf("%+v", r)
			}
		},
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":""}],"stream":false}`,
	}, {
		name: "U+2028 escaped, HTML not, as encoding/json writes them",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"<b>&` + "\u2028" + `"}],"stream":false}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"<b>&\u2028"}],"stream":false}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			if err := Unmarshal([]byte(tt.in), &r); err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, &r)
			}
			got, err := Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == "" {
				want = tt.in
			}
			if string(got) != want {
				t.Errorf("encoded\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestRequestErrors: a member of the wrong JSON type is an error naming it
// by JSON pointer.
func TestRequestErrors(t *testing.T) {
	tests := []struct{ in, pointer string }{
		{`{"model":5}`, "/model"},
		{`{"max_tokens":"5"}`, "/max_tokens"},
		{`{"max_tokens":true}`, "/max_tokens"},
		{`{"messages":{}}`, "/messages"},
		{`{"messages":["hi"]}`, "/messages/0"},
		{`{"messages":[{"role":"user","content":7}]}`, "/messages/0/content"},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "/messages/0/content/0/text"},
		{`{"system":true}`, "/system"},
		{`{"tools":[{"name":"f","strict":"yes"}]}`, "/tools/0/strict"},
		{`{"tool_choice":"auto"}`, "/tool_choice"},
		{`{"thinking":{"type":"enabled","budget_tokens":"x"}}`, "/thinking/budget_tokens"},
	}
	for _, tt := range tests {
		var r Request
		err := Unmarshal([]byte(tt.in), &r)
		var se *jsonv2.SemanticError
		if !errors.As(err, &se) || string(se.JSONPointer) != tt.pointer {
			t.Errorf("Unmarshal(%s) = %v, want an error at %s", tt.in, err, tt.pointer)
		}
	}
	if err := Unmarshal([]byte(`{"model":`), &Request{}); err == nil {
		t.Errorf("malformed JSON read")
	}
}

// TestContentMarshal: blocks (even none) are an array, else a string.
func TestContentMarshal(t *testing.T) {
	for _, tt := range []struct {
		c    Content
		want string
	}{
		{Content{Text: "a"}, `"a"`},
		{Content{}, `""`},
		{Content{Blocks: []Block{}}, `[]`},
		{Content{Text: "ignored", Blocks: []Block{{Type: BlockText, Text: "b"}}}, `[{"type":"text","text":"b"}]`},
	} {
		got, err := Marshal(tt.c)
		if err != nil || string(got) != tt.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tt.c, got, err, tt.want)
		}
	}
}

// FuzzRequest: a body the types read encodes as valid JSON that reads
// back to the same request (an encoding loses nothing the first reading
// kept), and every top-level member name of a request read is in its
// encoding.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"auto"},"gateway":{},"x":[1]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":"\u2028"}}],"z":null}],"thinking":{"type":"adaptive"},"output_config":{"format":{"type":"json_schema","schema":{}}}}`,
		`{"model":"m","model":"n"}`, `{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Request
		if Unmarshal(body, &r) != nil {
			return
		}
		out, err := Marshal(&r)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
		var back Request
		if err := Unmarshal(out, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", out, err)
		}
		again, err := Marshal(&back)
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("encoded\n%s\nthen\n%s (%v)", out, again, err)
		}
		if !reflect.DeepEqual(topNames(t, out), topNames(t, again)) {
			t.Fatalf("names differ")
		}
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
			for name := range topNames(t, body) {
				if _, ok := topNames(t, out)[name]; !ok && !omitted(name) {
					t.Fatalf("member %q of %s lost: %s", name, body, out)
				}
			}
		}
	})
}

// omitted reports whether a modelled member may be left out of an encoding
// (at its zero value, or null).
func omitted(name string) bool {
	switch name {
	case "model", "max_tokens", "messages", "stream":
		return false
	}
	return strings.Contains(",system,temperature,top_p,top_k,stop_sequences,tools,tool_choice,metadata,thinking,output_config,", ","+name+",")
}

// topNames is the member names of a JSON object (nil for another value).
func topNames(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	names := make(map[string]bool, len(m))
	for k := range m {
		names[k] = true
	}
	return names
}

// TestRequestLastWins: of an object given twice under one name, the last
// is read alone, as a reader of maps reads it, not the two merged.
func TestRequestLastWins(t *testing.T) {
	var r Request
	in := `{"model":"a","model":"b","tool_choice":{"type":"tool","name":"f"},"tool_choice":{"type":"auto"},` +
		`"metadata":{"user_id":"u"},"metadata":{},"messages":[{"role":"user","content":[{"type":"image",` +
		`"source":{"type":"base64","media_type":"image/png","data":"AA=="},"source":{"type":"url","url":"https://x"},` +
		`"cache_control":{"type":"ephemeral","ttl":"1h"},"cache_control":{"type":"ephemeral"}}]}]}`
	if err := Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	b := r.Messages[0].Content.Blocks[0]
	if r.Model != "b" || r.ToolChoice.Type != ToolChoiceAuto || r.ToolChoice.Name != "" || r.Metadata.UserID != "" ||
		b.Source.MediaType != "" || b.Source.URL != "https://x" || b.CacheControl.TTL != "" {
		t.Errorf("%+v", r)
	}
}

// Marshal is MarshalWrite into a new slice, for the tests.
func Marshal(v any) ([]byte, error) { return jsonv2.Marshal(v, encodeOptions) }
