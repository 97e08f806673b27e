package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzAppend: with html, Append is what encoding/json writes; without, it
// differs only in leaving <, > and & as they are, and reads back the same.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "<&>", "\x00\x1f\n\r\t\b\f", "\u2028\u2029", "\xff\xfe", "é€😀", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q, html) = %s, encoding/json %s", s, got, want)
		}
		plain := Append(nil, s, false)
		if bytes.ContainsAny(plain, "\n\r") {
			t.Fatalf("Append(%q) = %s holds a raw line break", s, plain)
		}
		var back, wantBack string
		if err := json.Unmarshal(plain, &back); err != nil {
			t.Fatalf("Append(%q) = %s: %v", s, plain, err)
		}
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("Append(%q) reads back %q, want %q", s, back, wantBack)
		}
		if strings.ContainsAny(s, "<>&") && bytes.Contains(plain, []byte(`\u003c`)) {
			t.Fatalf("Append(%q) without html escaped <: %s", s, plain)
		}
	})
}

// BenchmarkAppend: a short text with a quote and a line break, appended
// by Append, by encoding/json's Marshal and by jsontext's AppendQuote.
func BenchmarkAppend(b *testing.B) {
	s := "Buzzgate is a \"gateway\" that sends each request\nto the first provider that answers"
	buf := make([]byte, 0, 256)
	b.Run("jsonstr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = Append(buf[:0], s, true)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := json.Marshal(s)
			buf = append(buf[:0], v...)
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = jsontext.AppendQuote(buf[:0], s)
		}
	})
}
