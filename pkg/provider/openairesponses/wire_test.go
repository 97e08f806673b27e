package openairesponses

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzEachMember checks the member walker against encoding/json: the same
// keys, in order, each with its value as written.
func FuzzEachMember(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}], "d":"x\"y", "e":null,"f":-1.5e3, "g":{"h":[]}} `,
		`{"typ\u0065":"response.created","type":"x","type":"y"}`, `{"a":"\\"}`, `{"a":[[[]]],"b":true,"c":false}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		b := []byte(data)
		if !json.Valid(b) || firstByte(b) != '{' {
			if _, err := parseEvent("", b); err == nil {
				t.Fatalf("parseEvent(%q) took data that is not an object", data)
			}
			return
		}
		type member struct{ key, value string }
		var got []member
		eachMember(b, func(k, v []byte) { got = append(got, member{string(k), string(v)}) })
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.Token() // {
		var want []member
		for dec.More() {
			tok, _ := dec.Token()
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			want = append(want, member{tok.(string), string(v)})
		}
		if len(got) != len(want) {
			t.Fatalf("%q: members %q, want %q", data, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: member %d is %q, want %q", data, i, got[i], want[i])
			}
		}
	})
}
