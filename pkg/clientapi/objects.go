package clientapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Provider objects: what a request may name that lives in the provider's
// upstream account rather than in the request (a file uploaded there, a
// container, a vector store, a stored conversation or item). The account is
// the operator's, one for every project, so such a reference would let one
// project's key reach another project's objects. Each client API finds the
// references its requests can make (API.ProviderObject); the handler
// routes such a request only to providers whose config allows it
// (provider_objects: allow), and refuses it when none does, before any
// provider call (docs/configuration.md#provider-objects).

// ObjectRef is a reference to an object stored at the provider: Param is
// the field that holds it, What names the kind of object.
type ObjectRef struct {
	Param, What string
}

// Refused is the error for a request whose reference no route of model may
// carry.
func (r ObjectRef) Refused(model string) error {
	return llm.Errorf(llm.CodeInvalidRequest, r.Param,
		"%s refers to %s stored in the provider's account, which no provider of model %s accepts from this gateway: an upstream account is shared by every project; send the content itself",
		r.Param, r.What, llm.Quote(model))
}

// MayRefer is a quick screen: false when body contains none of words (JSON
// strings, quotes included, of lowercase letters and '_': a key or a type
// as written, which the same word inside a client's text, its quotes
// escaped, does not match) and no \u escape of such a letter (a key
// written with escapes is read as the key it spells), so that it cannot
// refer to a provider object and need not be parsed. Escapes of other
// characters (text beyond ASCII, Go's escaped '<') do not count.
//
// One walk over the body's quotes looks for every word at once (a search
// per word costs as much as the walk, each): each quote is found by the
// vectorised byte search, and only a quote followed by a word's first
// letter is compared with the words. The escapes are found by their "00".
// BenchmarkMayRefer measures it on a coding agent's 1 MB body.
func MayRefer(body []byte, words ...string) bool {
	var first [256]bool // the bytes that follow a word's opening quote
	for _, w := range words {
		if len(w) < 2 || w[0] != '"' {
			// Not a JSON string: looked for on its own.
			if bytes.Contains(body, []byte(w)) {
				return true
			}
			continue
		}
		first[w[1]] = true
	}
	for i := 0; ; {
		j := bytes.IndexByte(body[i:], '"')
		if j < 0 {
			break
		}
		i += j + 1 // body[i-1] is a quote
		if i == len(body) || !first[body[i]] {
			continue
		}
		for _, w := range words {
			if len(w) >= 2 && w[0] == '"' && len(body)-i >= len(w)-1 && string(body[i:i+len(w)-1]) == w[1:] {
				return true
			}
		}
	}
	return letterEscape(body)
}

// letterEscape reports whether body holds a \u escape of a lowercase
// ASCII letter or '_' (\u0061 to \u007a, \u005f). It looks for the
// escape's "00", rarer in a request than its backslash (every \n and \"
// has one).
func letterEscape(body []byte) bool {
	for off := 0; ; {
		i := bytes.Index(body[off:], []byte("00"))
		if i < 0 {
			return false
		}
		i += off // body[i-2:i+4] is \u00XX
		if i >= 2 && i+4 <= len(body) && body[i-1] == 'u' && escapes(body, i-2) {
			if c, ok := hexByte(body[i+2], body[i+3]); ok && (c >= 'a' && c <= 'z' || c == '_') {
				return true
			}
		}
		off = i + 1
	}
}

// escapes reports whether body[i] is a backslash that starts an escape:
// one preceded by an even run of backslashes (each pair is an escaped
// backslash).
func escapes(body []byte, i int) bool {
	n := 0
	for j := i; j >= 0 && body[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

func hexByte(hi, lo byte) (byte, bool) {
	h, ok1 := hexDigit(hi)
	l, ok2 := hexDigit(lo)
	return h<<4 | l, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Fields is raw's members when it is a JSON object, else nil. Keys are
// looked up as written: an upstream reads them so.
func Fields(raw json.RawMessage) map[string]json.RawMessage {
	o, _ := jsonobj.Parse(raw)
	return o
}

// Items is raw's elements when it is a JSON array, else nil.
func Items(raw json.RawMessage) []json.RawMessage {
	l, _ := jsonobj.Elements(raw)
	return l
}

// Str is raw as a string, or "" when it is not one.
func Str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Present returns a field that is there and not null.
func Present(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := m[name]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// At is the path of element i of the array at path.
func At(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// Find is the path of the first member named name, not null, in raw or at
// any depth below it (at is raw's path), members in sorted order; ok is
// false when there is none.
func Find(raw json.RawMessage, at, name string) (path string, ok bool) {
	if m := Fields(raw); m != nil {
		if _, ok := Present(m, name); ok {
			return at + "." + name, true
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p, ok := Find(m[k], at+"."+k, name); ok {
				return p, true
			}
		}
		return "", false
	}
	for i, el := range Items(raw) {
		if p, ok := Find(el, At(at, i), name); ok {
			return p, true
		}
	}
	return "", false
}
