package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/canonjson"
)

var duplicateSeeds = []string{
	`{"model":"m","max_tokens":1,"max_tokens":900,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi","content":"ho"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","type":"array"}}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"max_tok\u0065ns":900}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"gateway":{"retry":{"backoff":"1s","backoff":"2s"}}}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"a\u00e9":1,"aé":2}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"x":[{"a":1},{"a":2}],"y":{"a":{"a":1}}}`,
	`{"model":"m","model":"n","messages":[{"role":"user"}]}`,
	`{"model":"m","messages":[{"role":"user","role":"x"}]}`,
	`{"a":1,"a":2}`,
	`[{"a":1,"a":2}]`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"big":{` + manyKeys(40, 39) + `}}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"big":{` + manyKeys(40, -1) + `}}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"bad":"\xff","b\xff":1,"b\xfe":2}`,
}

// manyKeys is n members k0, k1, ...; with again >= 0, k<again> once more
// at the end.
func manyKeys(n, again int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	if again >= 0 {
		fmt.Fprintf(&b, `"k%d":0,`, again)
	}
	return strings.TrimSuffix(b.String(), ",")
}

// hasDuplicate is the reference: canonjson, the fingerprint's parser,
// refuses a member name given twice (known is false when it refuses the
// body for another reason, or encoding/json does).
func hasDuplicate(body []byte) (dup, known bool) {
	if !json.Valid(body) {
		return false, false
	}
	_, err := canonjson.Canonicalize(body)
	var ce *canonjson.Error
	switch {
	case err == nil:
		return false, true
	case errors.As(err, &ce) && strings.HasPrefix(ce.Msg, "duplicate object member name"):
		return true, true
	}
	return false, false
}

func isDuplicateError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeInvalidRequest && strings.Contains(e.Message, "twice")
}

// FuzzDuplicateMembers: a body that is one JSON object is refused for a
// member name given twice, at any depth, exactly when the canonical JSON
// of the fingerprint refuses it for that: by the Chat Completions decoder
// (its fast path or its fallback), by RequestMembers (every other API's
// first scan) and by CheckUnique.
func FuzzDuplicateMembers(f *testing.F) {
	for _, s := range append(duplicateSeeds, splitSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, known := hasDuplicate(body)
		if !known {
			return
		}
		ref := CheckUnique(body)
		if got := isDuplicateError(ref); got != want {
			t.Fatalf("%q: CheckUnique says duplicate %v, canonjson %v", body, got, want)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			return // not an object: refused as such
		}
		// The scans report the first name given twice, as CheckUnique does.
		same := func(err error) bool {
			if !want {
				return !isDuplicateError(err)
			}
			var e, r *Error
			return errors.As(err, &e) && errors.As(ref, &r) && e.Message == r.Message && e.Param == r.Param
		}
		if _, err := DecodeChatRequest(body); !same(err) {
			t.Fatalf("%q: DecodeChatRequest %v; CheckUnique %v", body, err, ref)
		}
		if _, err := RequestMembers(body); !same(err) {
			t.Fatalf("%q: RequestMembers %v; CheckUnique %v", body, err, ref)
		}
	})
}

// A duplicate in the second half of a large body's messages, which a
// second goroutine checks, is found too.
func TestDuplicateInALargeBody(t *testing.T) {
	turn := `{"role":"user","content":"` + strings.Repeat("x", 1000) + `"}`
	turns := strings.Repeat(turn+",", parallelMessages/len(turn)+10)
	for _, last := range []string{`{"role":"user","content":"a","content":"b"}`, `{"role":"user","content":"a"}`} {
		body := []byte(`{"model":"m","messages":[` + turns + last + `]}`)
		_, err := DecodeChatRequest(body)
		if dup := strings.Contains(last, `"content":"b"`); isDuplicateError(err) != dup || (!dup && err != nil) {
			t.Errorf("a body of %d bytes ending in %s: %v", len(body), last, err)
		}
	}
}

// TestCheckUniqueDepth: CheckUnique reads as deep as encoding/json does,
// past the depth the fast scans give up at, and no deeper; it reads the
// values after the first, as a json.Decoder does.
func TestCheckUniqueDepth(t *testing.T) {
	nested := func(depth int, inner string) []byte {
		return []byte(strings.Repeat(`{"x":`, depth-1) + inner + strings.Repeat(`}`, depth-1))
	}
	for _, c := range []struct {
		name string
		body []byte
		dup  bool
		top  bool
	}{
		{"at the top", []byte(`{"a":1,"a":2}`), true, true},
		{"in an array", []byte(`[{"a":1,"a":2}]`), true, false},
		{"in a second value", []byte(`{"x":1} {"a":1,"a":2}`), true, true},
		{"after a second array", []byte(`{"x":1} [{"a":1,"a":2}]`), true, false},
		{"deeper than the fast scans", nested(600, `{"a":1,"a":2}`), true, false},
		{"as deep as encoding/json reads", nested(maxJSONDepth, `{"a":1,"a":2}`), true, false},
		{"deeper than encoding/json reads", nested(maxJSONDepth+1, `{"a":1,"a":2}`), false, false},
		{"invalid before the duplicate", []byte(`{"x":tru,"a":1,"a":2}`), false, false},
		{"invalid after the duplicate", []byte(`{"a":1,"a":2,"x":tru}`), true, true},
		{"unique", nested(600, `{"a":1,"b":2}`), false, false},
	} {
		err := CheckUnique(c.body)
		if isDuplicateError(err) != c.dup {
			t.Errorf("%s: CheckUnique = %v, want a duplicate %v", c.name, err, c.dup)
			continue
		}
		if c.dup {
			var e *Error
			if errors.As(err, &e); (e.Param == "a") != c.top {
				t.Errorf("%s: param %q, want the top-level member named %v", c.name, e.Param, c.top)
			}
		}
	}
}

// checkUniqueTokens is CheckUnique by encoding/json's tokens, the
// reference FuzzCheckUniqueTokens holds it to.
func checkUniqueTokens(body []byte) error {
	type level struct {
		names   map[string]struct{}
		object  bool
		nameNow bool // an object's next token is a member name
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:top]
			if top > 0 && stack[top-1].object {
				stack[top-1].nameNow = true
			}
			continue
		}
		if top >= 0 && stack[top].nameNow {
			name, _ := tok.(string)
			if _, seen := stack[top].names[name]; seen {
				return DuplicateMember(name, top == 0)
			}
			if stack[top].names == nil {
				stack[top].names = map[string]struct{}{}
			}
			stack[top].names[name] = struct{}{}
			stack[top].nameNow = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, level{object: d == '{', nameNow: d == '{'})
			continue
		}
		if top >= 0 && stack[top].object {
			stack[top].nameNow = true
		}
	}
}

// FuzzCheckUniqueTokens: CheckUnique gives encoding/json's token walk's
// verdict on any valid body. (On an invalid one the walk may name a
// member whose colon never comes, which the scan does not.)
func FuzzCheckUniqueTokens(f *testing.F) {
	for _, s := range append(duplicateSeeds, splitSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		got, want := CheckUnique(body), checkUniqueTokens(body)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			var g, w *Error
			errors.As(got, &g)
			errors.As(want, &w)
			t.Fatalf("%q: CheckUnique %v, encoding/json's tokens %v", body, g, w)
		}
	})
}
