package llm

import (
	"encoding/json"
	"maps"
	"reflect"
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

// TestHubRequest: a Hub reads the request from the members written as
// DecodeChatRequest decodes it from the body, and decodes the body when
// the caller does not vouch for its names or a member is written so that
// the decoder would read it otherwise.
func TestHubRequest(t *testing.T) {
	msgs := json.RawMessage(`[{"role":"user","content":"hi"}]`)
	write := func(ms ...[2]string) *ObjectWriter {
		var w ObjectWriter
		for _, m := range ms {
			if m[0] == "messages" {
				w.AddMessages(strings.Count(m[1], `"role"`), json.RawMessage(m[1]))
				continue
			}
			w.Add(m[0], json.RawMessage(m[1]))
		}
		return &w
	}
	for _, tt := range []struct {
		name   string
		w      *ObjectWriter
		reread bool
	}{
		{"plain", write([2]string{"model", `"m:floor"`}, [2]string{"messages", string(msgs)}, [2]string{"stream", "true"},
			[2]string{"stream_options", `{"include_usage":true}`}, [2]string{"gateway", `{"retry":{"backoff":"1s"}}`},
			[2]string{"provider", `{"zdr":true}`}, [2]string{"max_completion_tokens", "5"}), false},
		{"no messages", write([2]string{"model", `"m"`}, [2]string{"messages", `[]`}), false},
		{"model too long", write([2]string{"model", `"` + strings.Repeat("x", 300) + `"`}, [2]string{"messages", string(msgs)}), false},
		{"bad gateway", write([2]string{"model", `"m"`}, [2]string{"messages", string(msgs)}, [2]string{"gateway", `{"x":1}`}), false},
		{"a name twice", write([2]string{"model", `"m"`}, [2]string{"messages", string(msgs)}, [2]string{"model", `"n"`}), true},
		{"an escaped name", write([2]string{"model", `"m"`}, [2]string{"messages", string(msgs)}, [2]string{"a\"b", `1`}), true},
		{"a separator in a name", write([2]string{"model", `"m"`}, [2]string{"messages", string(msgs)}, [2]string{"a\u2028b", `1`}), true},
		{"a spaced value", write([2]string{"model", `"m"`}, [2]string{"messages", string(msgs)}, [2]string{"gateway", ` {} `}), true},
		{"a name twice at depth", write([2]string{"model", `"m"`}, [2]string{"messages", string(msgs)}, [2]string{"tools", `[{"a":1,"a":2}]`}), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hub := tt.w.Hub()
			if hub.reread != tt.reread {
				t.Errorf("reread = %v, want %v", hub.reread, tt.reread)
			}
			want, wantErr := DecodeChatRequest(hub.Bytes())
			got, gotErr := hub.Request(false)
			if !sameRequest(want, wantErr, got, gotErr) {
				t.Errorf("Request(false) = %+v, %v; want DecodeChatRequest's %+v, %v", got, gotErr, want, wantErr)
			}
			got, gotErr = hub.Request(true)
			if tt.name == "a name twice at depth" {
				// Vouched for by the caller: not looked for again.
				if gotErr != nil || wantErr == nil {
					t.Errorf("Request(true) = %v, DecodeChatRequest %v; want nil and the name given twice", gotErr, wantErr)
				}
				return
			}
			if !sameRequest(want, wantErr, got, gotErr) {
				t.Errorf("Request(true) = %+v, %v; want DecodeChatRequest's %+v, %v", got, gotErr, want, wantErr)
			}
		})
	}
	// Messages written by AddMessages are taken as checked: the count is
	// the translation's word.
	vouched := write([2]string{"model", `"m"`}, [2]string{"messages", `[{"role":""}]`})
	if _, err := vouched.Hub().Request(true); err != nil {
		t.Errorf("vouched messages checked again: %v", err)
	}
	if _, err := HubOf(vouched.Bytes()).Request(true); err == nil {
		t.Error("HubOf's body not decoded")
	}
	// But a list that is not an array is checked.
	var failed ObjectWriter
	failed.Add("model", json.RawMessage(`"m"`))
	failed.AddMessages(1, json.RawMessage(`null`))
	if _, err := failed.Hub().Request(true); err == nil || !strings.Contains(err.Error(), "messages is required") {
		t.Errorf("messages written as null: %v, want messages is required", err)
	}
}

// sameRequest reports whether two readings of one body agree.
func sameRequest(a *ChatRequest, aErr error, b *ChatRequest, bErr error) bool {
	if aErr != nil || bErr != nil {
		return aErr != nil && bErr != nil && aErr.Error() == bErr.Error() && AsError(aErr).Param == AsError(bErr).Param
	}
	ua, errA := a.UpstreamBody("up")
	ub, errB := b.UpstreamBody("up")
	return a.Model == b.Model && a.Suffix == b.Suffix && a.Stream == b.Stream && a.IncludeUsage == b.IncludeUsage &&
		a.Size() == b.Size() && reflect.DeepEqual(a.Gateway, b.Gateway) && reflect.DeepEqual(a.Provider, b.Provider) &&
		string(ua) == string(ub) && errA == nil && errB == nil && maps.EqualFunc(a.fields, b.fields, func(x, y json.RawMessage) bool { return string(x) == string(y) })
}
