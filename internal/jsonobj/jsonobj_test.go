package jsonobj

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want Object // nil: an error
	}{
		{raw: `{}`, want: Object{}},
		{raw: ` {"a":1, "A":"x"} `, want: Object{"a": json.RawMessage(`1`), "A": json.RawMessage(`"x"`)}},
		{raw: `{"a":null}`, want: Object{"a": json.RawMessage(`null`)}},
		{raw: ``},
		{raw: `null`},
		{raw: `[]`},
		{raw: `[{}]`},
		{raw: `"s"`},
		{raw: `"{}"`},
		{raw: `{`},
		{raw: `{"a":}`},
		{raw: `{} {}`},
	} {
		got, err := Parse(json.RawMessage(tt.raw))
		if tt.want == nil {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", tt.raw, got)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.raw, got, err, tt.want)
			continue
		}
		for k, v := range tt.want {
			if string(got[k]) != string(v) {
				t.Errorf("Parse(%q)[%q] = %s, want %s", tt.raw, k, got[k], v)
			}
		}
	}
}

func TestStr(t *testing.T) {
	o := Object{
		"s": json.RawMessage(` "a\u00e9" `), "empty": json.RawMessage(`""`), "null": json.RawMessage(`null`),
		"n": json.RawMessage(`1`), "bad": json.RawMessage(`"a`), "nothing": json.RawMessage(``),
	}
	for _, tt := range []struct {
		key  string
		want string
		ok   bool
	}{
		{"s", "aé", true},
		{"empty", "", true},
		{"S", "", false}, // keys are exact
		{"missing", "", false},
		{"null", "", false},
		{"n", "", false},
		{"bad", "", false},
		{"nothing", "", false},
	} {
		if got, ok := o.Str(tt.key); got != tt.want || ok != tt.ok {
			t.Errorf("Str(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}

func TestElements(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want []string
		ok   bool
	}{
		{``, nil, true},
		{` null `, nil, true},
		{`[]`, []string{}, true},
		{` [1, "a", {"b":null}] `, []string{`1`, `"a"`, `{"b":null}`}, true},
		{`{}`, nil, false},
		{`{"a":1}`, nil, false},
		{`"[]"`, nil, false},
		{`[1,`, nil, false},
	} {
		l, ok := Elements(json.RawMessage(tt.raw))
		got := make([]string, 0, len(l))
		for _, e := range l {
			got = append(got, string(e))
		}
		if ok != tt.ok || len(l) != len(tt.want) || !slices.Equal(got, tt.want[:len(tt.want):len(tt.want)]) {
			t.Errorf("Elements(%q) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
	}
}

func TestIsNullNonNull(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		null bool
	}{
		{``, true},
		{`null`, true},
		{" \t\nnull\r\n", true},
		{`"null"`, false},
		{`nul`, false},
		{`0`, false},
		{`{}`, false},
		{`[null]`, false},
	} {
		if got := IsNull([]byte(tt.raw)); got != tt.null {
			t.Errorf("IsNull(%q) = %v, want %v", tt.raw, got, tt.null)
		}
		got := NonNull(json.RawMessage(tt.raw))
		if tt.null && got != nil || !tt.null && string(got) != tt.raw {
			t.Errorf("NonNull(%q) = %q", tt.raw, got)
		}
	}
}

func TestNumber(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want float64
		ok   bool
	}{
		{`0`, 0, true},
		{`-1.5`, -1.5, true},
		{`1e3`, 1000, true},
		{`1024.0`, 1024, true},
		{``, 0, false},
		{`"1"`, 0, false},
		{`null`, 0, false},
		{`true`, 0, false},
		{`1e400`, 0, false},
		{`-`, 0, false},
		{`1.2.3`, 0, false},
	} {
		if got, ok := Number(json.RawMessage(tt.raw)); got != tt.want || ok != tt.ok {
			t.Errorf("Number(%q) = %v, %v; want %v, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
	}
}

func TestMarshal(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want string
	}{
		{"a<b>&c", `"a<b>&c"`}, // no HTML escaping
		{[]string{"x", "y"}, `["x","y"]`},
		{struct {
			A string          `json:"a"`
			B json.RawMessage `json:"b,omitempty"`
		}{A: "1", B: json.RawMessage(` { "c" : 2 } `)}, `{"a":"1","b":{"c":2}}`}, // compact
		{map[string]int{"b": 2, "a": 1}, `{"a":1,"b":2}`},
		{json.RawMessage(`{`), `null`}, // not JSON: null, never an error
		{func() {}, `null`},
	} {
		if got := Marshal(tt.v); string(got) != tt.want {
			t.Errorf("Marshal(%#v) = %s, want %s", tt.v, got, tt.want)
		}
	}
}

// FuzzParse: Parse accepts what encoding/json reads as an object, spaces
// around it aside (bytes.TrimSpace's, which are more than JSON's), and
// nothing else, keeping every member as written; Elements likewise for
// arrays; a valid JSON number reads as encoding/json reads it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}],"A":"x"}`, ` null `, `[1,"a"]`, `{"a":}`, `1e3`, `-0.5`, `1e999`, `"s"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw := json.RawMessage(s)
		trimmed := bytes.TrimSpace(raw)
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(trimmed, &want) != nil || want == nil
		o, err := Parse(raw)
		if (err != nil) != wantErr {
			t.Fatalf("Parse(%q): error %v, encoding/json reads %v", s, err, want)
		}
		for k, v := range want {
			if string(o[k]) != string(v) {
				t.Fatalf("Parse(%q)[%q] = %s, want %s", s, k, o[k], v)
			}
		}
		var list []json.RawMessage
		listErr := json.Unmarshal(trimmed, &list) != nil
		l, ok := Elements(raw)
		if IsNull(raw) {
			listErr, list = false, nil // absent reads as null
		}
		if ok == listErr || len(l) != len(list) {
			t.Fatalf("Elements(%q) = %q, %v; encoding/json reads %q", s, l, ok, list)
		}
		var f float64
		if json.Valid(raw) && len(trimmed) == len(raw) {
			numErr := json.Unmarshal(raw, &f) != nil
			if got, ok := Number(raw); ok == numErr || ok && got != f {
				t.Fatalf("Number(%q) = %v, %v; encoding/json reads %v", s, got, ok, f)
			}
		}
	})
}
