package llm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

func TestHintSet(t *testing.T) {
	var h HintSet
	for _, name := range []string{"top_k", "metadata", "top_k", "tools[web_search]", "metadata"} {
		h.Add(name)
	}
	if want := []string{"top_k", "metadata", "tools[web_search]"}; !slices.Equal(h.Names, want) {
		t.Errorf("Names = %q, want %q: each once, in the order met", h.Names, want)
	}
}

func TestObjectWriter(t *testing.T) {
	var empty ObjectWriter
	if got := string(empty.Bytes()); got != "{}" {
		t.Errorf("zero ObjectWriter = %s, want {}", got)
	}
	sized := NewObjectWriter(64)
	if got := string(sized.Bytes()); got != "{}" {
		t.Errorf("NewObjectWriter(64) = %s, want {}", got)
	}
	keys := []string{"model", "a<b>&c", "quote\"back\\slash", "line\u2028sep", "ctl\x01", "bad\xff", ""}
	for _, w := range []*ObjectWriter{&empty, &sized} {
		for i, k := range keys {
			w.Add(k, json.RawMessage(strings.Repeat("[", i%2)+`1`+strings.Repeat("]", i%2)))
		}
		got := w.Bytes()
		if !json.Valid(got) {
			t.Fatalf("not JSON: %s", got)
		}
		// The keys read back as encoding/json reads them, in order, and
		// are written as its Encoder writes them without HTML escaping.
		var want strings.Builder
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		for _, k := range keys {
			if err := enc.Encode(k); err != nil {
				t.Fatal(err)
			}
		}
		var b strings.Builder
		b.WriteByte('{')
		for i, line := range strings.Split(strings.TrimSuffix(want.String(), "\n"), "\n") {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(line + ":" + strings.Repeat("[", i%2) + "1" + strings.Repeat("]", i%2))
		}
		b.WriteByte('}')
		if string(got) != b.String() {
			t.Errorf("ObjectWriter wrote\n%s\nwant\n%s", got, b.String())
		}
	}
}

func TestTextContent(t *testing.T) {
	for _, tt := range []struct {
		parts []chat.TextPart
		want  string
	}{
		{nil, `""`},
		{[]chat.TextPart{}, `""`},
		{[]chat.TextPart{{Type: "text", Text: "a<b>"}}, `[{"type":"text","text":"a<b>"}]`},
		{[]chat.TextPart{{Type: "text", Text: "x"}, {Type: "text", Text: ""}}, `[{"type":"text","text":"x"},{"type":"text","text":""}]`},
	} {
		if got := string(TextContent(tt.parts)); got != tt.want {
			t.Errorf("TextContent(%v) = %s, want %s", tt.parts, got, tt.want)
		}
	}
}

func TestInvalid(t *testing.T) {
	err := Invalid("messages[0].role", "%s must be %q", "messages[0].role", "user")
	if err.Code != CodeInvalidRequest || err.Param != "messages[0].role" || err.Message != `messages[0].role must be "user"` {
		t.Errorf("Invalid = %+v", err)
	}
}

func TestQuote(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"gpt-4o", `"gpt-4o"`},
		{"", `""`},
		{"a\"b\n", `"a\"b\n"`},
		{strings.Repeat("m", 64), `"` + strings.Repeat("m", 64) + `"`},
		{strings.Repeat("m", 65), "(unprintable)"},
		{"bad\xff", "(unprintable)"},
	} {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestBodyError(t *testing.T) {
	const notObject = "request body must be a JSON object"
	for _, tt := range []struct{ body, want string }{
		{``, "request body is not valid JSON: syntax error at byte 0"},
		{" \n ", "request body is not valid JSON: syntax error at byte 3"},
		{`{`, "request body is not valid JSON: syntax error at byte 1"},
		{` {"a":}`, "request body is not valid JSON: syntax error at byte 7"},
		{`{} x`, "request body is not valid JSON: syntax error at byte 4"},
		{`[1,`, notObject},
		{`[]`, notObject},
		{`null`, notObject},
		{`"s"`, notObject},
		{`1`, notObject},
		{`{}`, notObject}, // an object a stricter reading refused
		{`{"a":1,"a":2}`, notObject},
	} {
		err := BodyError([]byte(tt.body))
		if err == nil || err.Code != CodeInvalidRequest || err.Param != "" || err.Message != tt.want {
			t.Errorf("BodyError(%q) = %+v, want %q", tt.body, err, tt.want)
		}
	}
}
