package llm

import (
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
