package llm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

func TestSetTopLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		set  map[string][]byte
		want string
	}{
		{`{"model":"a","x":{"y":[1,2]},"stream":false}`, map[string][]byte{"model": []byte(`"b"`), "stream": []byte("true")}, `{"model":"b","x":{"y":[1,2]},"stream":true}`},
		{` { "x" : 1 , "gateway" : {} } `, map[string][]byte{"gateway": nil, "model": []byte(`"m"`)}, `{"x":1,"model":"m"}`},
		{`{"model":"a","model":"c"}`, map[string][]byte{"model": []byte(`"b"`)}, `{"model":"b"}`},
		{`{"mod\u0065l":"a"}`, map[string][]byte{"model": []byte(`"b"`)}, `{"mod\u0065l":"b"}`},
		{`{}`, map[string][]byte{"stream": []byte("true")}, `{"stream":true}`},
	} {
		got, err := SetTopLevel([]byte(tc.in), tc.set)
		if err != nil || string(got) != tc.want {
			t.Errorf("SetTopLevel(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":}`, `{"a":1} x`, `{"a":1`} {
		if _, err := SetTopLevel([]byte(bad), nil); err == nil {
			t.Errorf("SetTopLevel(%q) accepted it", bad)
		}
	}
}

func TestCaseVariant(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"a","MODEL":"b"}`:   "MODEL",
		`{"model":"a","Stream":true}`: "Stream",
		`{"model":"a","model":"b"}`:   "model",
		`{"model":"a","stream":true}`: "",
	} {
		ms, err := Members([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := CaseVariant(ms, "model", "stream", "gateway", "provider")
		if got != want {
			t.Errorf("CaseVariant(%s) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSetTopLevel: whatever Members accepts, encoding/json accepts, and the
// spliced body is valid JSON whose other members are unchanged.
func FuzzSetTopLevel(f *testing.F) {
	for _, s := range []string{`{"model":"a","x":1}`, `{"a":{"b":[1,"\u00e9"]},"model":null}`, `{ }`, `{"m\"":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ms, err := Members(body)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("Members accepted invalid JSON %q", body)
		}
		set := map[string][]byte{"model": []byte(`"x"`), "gateway": nil}
		out := Splice(ms, len(body), set)
		if parts := bytes.Join(SpliceParts(ms, set), nil); !bytes.Equal(parts, out) {
			t.Fatalf("SpliceParts(%q) = %q, Splice %q", body, parts, out)
		}
		var in, m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("spliced %q into invalid JSON %q: %v", body, out, err)
		}
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatal(err)
		}
		if string(m["model"]) != `"x"` {
			t.Fatalf("model = %s in %q", m["model"], out)
		}
		if _, ok := m["gateway"]; ok {
			t.Fatalf("gateway left in %q", out)
		}
		// Every other member is the input's, byte for byte (encoding/json
		// keeps the last of a repeated key, as Splice keeps the first: the
		// comparison skips keys the input repeats).
		seen := map[string]int{}
		for _, mb := range ms {
			seen[mb.Key]++
		}
		delete(in, "model")
		delete(in, "gateway")
		for k, v := range in {
			if seen[k] == 1 && string(m[k]) != string(v) {
				t.Fatalf("member %q changed: %s, was %s", k, m[k], v)
			}
		}
		if len(m) != len(in)+1 {
			t.Fatalf("%d members out of %d in (less gateway, with model): %q", len(m), len(in), out)
		}
	})
}

// TestSpliceParts: the pieces joined are Splice's body, a large value is a
// piece of its own in the body's own memory, and small ones are copied
// into few pieces.
func TestSpliceParts(t *testing.T) {
	big := `"` + strings.Repeat("x", partMin) + `"`
	body := []byte(`{"model":"a","messages":[` + big + `],"n":1,"tools":` + big + `,"gateway":{}}`)
	ms, err := Members(body)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string][]byte{"model": []byte(`"b"`), "gateway": nil, "stream": []byte("true")}
	parts := SpliceParts(ms, set)
	if got, want := string(bytes.Join(parts, nil)), string(Splice(ms, len(body), set)); got != want {
		t.Fatalf("joined %s\nwant %s", got, want)
	}
	within := func(p []byte) bool {
		start := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
		at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
		return at >= start && at+uintptr(len(p)) <= start+uintptr(len(body))
	}
	var shared []string
	for _, p := range parts {
		if within(p) {
			shared = append(shared, string(p))
		}
	}
	if len(shared) != 2 || shared[0] != "["+big+"]" || shared[1] != big {
		t.Errorf("pieces in the body's memory: %d, want the two large values", len(shared))
	}
	// {"model":"b","messages": | [big] | ,"n":1,"tools": | big | ,"stream":true}
	if len(parts) != 5 {
		t.Errorf("%d pieces, want 5", len(parts))
	}
}

// BenchmarkEachMember: a Messages stream's content_block_delta, the event
// a passed-through stream sends most, split into its members as the
// observer reads it: by the hand scanner with keys that share the event's
// memory (hand), the same with each key copied (hand-copy-keys), and by
// jsontext (jsontext).
func BenchmarkEachMember(b *testing.B) {
	var keys []string
	raw := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Buzzgate is a gateway that sends each request "}}`)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !EachMember(raw, func(Member) bool { return true }) {
				b.Fatal("not split")
			}
		}
	})
	b.Run("hand-copy-keys", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			keys = keys[:0]
			if !EachMember(raw, func(m Member) bool { keys = append(keys, strings.Clone(m.Key)); return true }) {
				b.Fatal("not split")
			}
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dec := jsontext.NewDecoder(bytes.NewReader(raw))
			if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
				b.Fatal(err)
			}
			for dec.PeekKind() != '}' {
				tok, err := dec.ReadToken()
				if err != nil {
					b.Fatal(err)
				}
				_ = tok.String()
				if _, err := dec.ReadValue(); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := dec.ReadToken(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
