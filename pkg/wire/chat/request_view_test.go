package chat

import (
	"strings"
	"testing"
)

// TestDecodeRequestView: the members are read as encoding/json reads them
// (any case, the last of two equal names winning); a message or tool not
// of its shape keeps its own error; a message's name counts only when
// spelled "name" and not null.
func TestDecodeRequestView(t *testing.T) {
	v, err := DecodeRequestView([]byte(`{"Model":"m","max_tokens":5,"reasoning_effort":"high","reasoning_effort":null,
		"messages":[{"role":"user","content":"hi","name":"bob"},null,1,{"ROLE":"assistant","content":null,"tool_calls":[{"id":"c"}],"Name":"x"},{"role":"tool","tool_call_id":"c","name":null}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}},{"type":1},null]}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "m" || v.MaxTokens == nil || *v.MaxTokens != 5 {
		t.Errorf("model %q max_tokens %v", v.Model, v.MaxTokens)
	}
	if v.ReasoningEffort != (OptString{Value: "high", Set: false}) {
		t.Errorf("reasoning_effort %+v, want high left by null, not set", v.ReasoningEffort)
	}
	type msg struct {
		role, content string
		calls         int
		id            string
		name, null    bool
		err           bool
	}
	want := []msg{
		{role: "user", content: `"hi"`, name: true},
		{null: true},
		{err: true},
		{role: "assistant", content: "null", calls: 1},
		{role: "tool", id: "c"},
	}
	if len(v.Messages) != len(want) {
		t.Fatalf("%d messages, want %d", len(v.Messages), len(want))
	}
	for i, m := range v.Messages {
		got := msg{m.Role, string(m.Content), len(m.ToolCalls), m.ToolCallID, m.HasName, m.Null, m.Err != nil}
		if got != want[i] {
			t.Errorf("messages[%d] = %+v, want %+v", i, got, want[i])
		}
	}
	if len(v.Tools) != 3 {
		t.Fatalf("%d tools", len(v.Tools))
	}
	if f := v.Tools[0]; f.Err != nil || f.Type != "function" || f.Function.Name != "f" || string(f.Function.Parameters) != `{"type":"object"}` || f.Function.Strict == nil || !*f.Function.Strict {
		t.Errorf("tools[0] = %+v", f)
	}
	if v.Tools[1].Err == nil {
		t.Error("tools[1]: no error for a type that is not a string")
	}
	if f := v.Tools[2]; f.Err != nil || f.Type != "" {
		t.Errorf("tools[2] (null) = %+v", f)
	}
}

// TestDecodeRequestViewFails: a body that is not an object of the shape
// fails as encoding/json fails it.
func TestDecodeRequestViewFails(t *testing.T) {
	for _, body := range []string{`[]`, `{"max_tokens":"x"}`, `{"messages":"x"}`, `{"tools":{}}`, `{"reasoning_effort":1}`, `{`} {
		if _, err := DecodeRequestView([]byte(body)); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}

// TestParseObject: each member as written (null as null, absent as nil),
// of a name given twice the last, names matched exactly and read with
// their escapes, every member kept in body order.
func TestParseObject(t *testing.T) {
	body := "{\"model\":\"a\", \"model\" : {\"x\": 1} ,\"input\":null,\"Model\":3,\"\\u0074ools\":[],\"gateway\":{\"retry\":{}},\"z\xff\":5}"
	o, ok := ParseObject([]byte(body))
	if !ok {
		t.Fatal("not read")
	}
	for _, c := range []struct {
		name string
		want string // "": absent
	}{
		{"model", `{"x": 1}`},
		{"input", `null`},
		{"tools", `[]`},
		{"Model", `3`},
		{"text", ``},
		{"z\xff", `5`},
	} {
		if got := o.Get(c.name); string(got) != c.want || (c.want == "") != (got == nil) {
			t.Errorf("%q: got %q, want %q", c.name, got, c.want)
		}
	}
	var keys []string
	for _, m := range o {
		keys = append(keys, m.Key)
	}
	if want := []string{"model", "model", "input", "Model", "tools", "gateway", "z\xff"}; strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("members %q, want %q", keys, want)
	}
	for _, b := range []string{``, `null`, `[]`, `{`, `{} {}`, `{"a":}`, `"{}"`} {
		if _, ok := ParseObject([]byte(b)); ok {
			t.Errorf("%q read as an object", b)
		}
	}
	if o, ok := ParseObject([]byte(` {} `)); !ok || o == nil || len(o) != 0 {
		t.Errorf("{}: %v, %v; want no members", o, ok)
	}
}

// TestDecodeRequestViewSpaced: an object between spaces JSON does not
// allow is no JSON (encoding/json's error), but its members are read, as
// jsonobj.Parse reads them, and none is named unread.
func TestDecodeRequestViewSpaced(t *testing.T) {
	v, err := DecodeRequestView([]byte("\f{\"seed\":1}\u00a0"))
	if err == nil || !v.Spaced() || string(v.Members.Get("seed")) != "1" || v.Unread(nil) != nil {
		t.Errorf("spaced: err %v, Spaced %v, members %v, unread %q", err, v.Spaced(), v.Members, v.Unread(nil))
	}
	v, err = DecodeRequestView([]byte(" {\"seed\":1,\"model\":null,\"x\":2}\n"))
	if err != nil || v.Spaced() || strings.Join(v.Unread(map[string]bool{"x": true}), ",") != "seed" {
		t.Errorf("JSON: err %v, Spaced %v, unread %q", err, v.Spaced(), v.Unread(map[string]bool{"x": true}))
	}
}

// TestParseArray: the elements as written, in order; anything but one
// array is not read.
func TestParseArray(t *testing.T) {
	l, ok := ParseArray([]byte(" [1, \"a\xff\", {\"b\":[2]} ,null] "))
	var got []string
	for _, e := range l {
		got = append(got, string(e))
	}
	if want := "1|\"a\xff\"|{\"b\":[2]}|null"; !ok || strings.Join(got, "|") != want {
		t.Errorf("got %q, %v; want %q", got, ok, want)
	}
	if l, ok := ParseArray([]byte(`[]`)); !ok || l == nil || len(l) != 0 {
		t.Errorf("[]: %v, %v; want no elements", l, ok)
	}
	for _, b := range []string{``, `null`, `{}`, `[`, `[] []`, `[1,]`, `"[]"`} {
		if _, ok := ParseArray([]byte(b)); ok {
			t.Errorf("%q read as an array", b)
		}
	}
}
