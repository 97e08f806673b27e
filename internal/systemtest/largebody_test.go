package systemtest_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

// A coding agent's 1 MB body goes through whole: the upstream gets each of
// the client's fields as it was sent, with the model replaced and
// streaming on. Keyed, the same body serialized another way is replayed
// and one character changed is a conflict; a body the fingerprint cannot
// take (a key given twice) is refused only after the checks that come
// before it, and a malformed body by the decoder, as for any body; the
// fingerprint refuses what the decoder lets through (invalid UTF-8).
func TestLargeBody(t *testing.T) {
	g := newGateway(t, setup{})
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128`)

	if a := mustCall(t, g.url, string(body)); a.status != 200 {
		t.Fatalf("unkeyed: %d %s", a.status, a.body)
	}
	reqs := g.ups[0].Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests, want 1", len(reqs))
	}
	var sent, got map[string]json.RawMessage
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(reqs[0].Body, &got); err != nil {
		t.Fatalf("upstream body: %v", err)
	}
	for k, v := range sent {
		if k != "model" && !bytes.Equal(got[k], v) {
			t.Errorf("upstream field %q differs from the client's (%d bytes, sent %d)", k, len(got[k]), len(v))
		}
	}
	if string(got["model"]) != `"up-0"` || string(got["stream"]) != "true" || string(got["stream_options"]) != `{"include_usage":true}` || len(got) != len(sent)+2 {
		t.Errorf("upstream model %s stream %s stream_options %s, %d fields for the client's %d", got["model"], got["stream"], got["stream_options"], len(got), len(sent))
	}

	first := mustCall(t, g.url, string(body), "Idempotency-Key", key(t))
	if first.status != 200 || first.replayed != "" {
		t.Fatalf("keyed: %d replayed=%q %s", first.status, first.replayed, first.body)
	}
	// encoding/json sorts the keys and escapes <, > and & as \u003c...
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	reserialized, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(reserialized, body) {
		t.Fatal("the re-serialized body is the same bytes: the test would prove nothing")
	}
	if a := mustCall(t, g.url, string(reserialized), "Idempotency-Key", key(t)); a.status != 200 || a.replayed != "true" || a.body != first.body {
		t.Errorf("the same body serialized another way: %d replayed=%q", a.status, a.replayed)
	}
	i := bytes.LastIndex(body, []byte("handler"))
	if i < 0 {
		t.Fatal("no word to change in the body")
	}
	changed := string(body[:i]) + "H" + string(body[i+1:])
	if a := mustCall(t, g.url, changed, "Idempotency-Key", key(t)); a.status != 409 || a.code != "idempotency_conflict" {
		t.Errorf("one character changed: %d %q, want 409 idempotency_conflict", a.status, a.code)
	}

	twice := string(body[:len(body)-1]) + `,"max_tokens":64}`
	a := mustCall(t, g.url, twice, "Idempotency-Key", key(t)+"-twice")
	if a.status != 400 || a.code != "invalid_request" || !strings.Contains(a.body, `member \"max_tokens\" twice`) {
		t.Errorf("a key given twice: %d %q %s, want 400 invalid_request from the fingerprint", a.status, a.code, a.body)
	}
	unknown := strings.Replace(twice, `"model":"m"`, `"model":"nope"`, 1)
	if a := mustCall(t, g.url, unknown, "Idempotency-Key", key(t)+"-unknown"); a.status != 404 || a.code != "model_not_found" {
		t.Errorf("a key given twice, for an unknown model: %d %q, want 404 model_not_found (the model is checked first)", a.status, a.code)
	}
	malformed := string(body[:len(body)/2])
	if a := mustCall(t, g.url, malformed, "Idempotency-Key", key(t)+"-malformed"); a.status != 400 || a.code != "invalid_request" || !strings.Contains(a.body, "not valid JSON") {
		t.Errorf("a body cut in half: %d %q %s, want 400 invalid_request from the decoder", a.status, a.code, a.body)
	}
	// A keyed body's message texts are checked by its fingerprint, not
	// twice: a bad escape or a raw control character in one is refused
	// all the same, and nothing is sent.
	j := bytes.Index(body, []byte(`\n`))
	if j < 0 {
		t.Fatal("no escape in the body")
	}
	for name, bad := range map[string]string{
		"bad escape":        string(body[:j]) + `\q` + string(body[j+2:]),
		"control character": string(body[:j]) + "\x01" + string(body[j+2:]),
	} {
		if a := mustCall(t, g.url, bad, "Idempotency-Key", key(t)+"-"+name); a.status != 400 || a.code != "invalid_request" {
			t.Errorf("a keyed body with a %s in a text: %d %q %s, want 400 invalid_request", name, a.status, a.code, a.body)
		}
		if a := mustCall(t, g.url, bad); a.status != 400 || a.code != "invalid_request" || !strings.Contains(a.body, "not valid JSON") {
			t.Errorf("the same unkeyed: %d %q %s, want 400 invalid_request from the decoder", a.status, a.code, a.body)
		}
	}
	// Invalid UTF-8, which encoding/json lets through as U+FFFD, leaves a
	// keyed body's fingerprint ambiguous.
	if a := mustCall(t, g.url, string(body[:j])+"\xff"+string(body[j+2:]), "Idempotency-Key", key(t)+"-utf8"); a.status != 400 || a.code != "invalid_request" || !strings.Contains(a.body, "invalid UTF-8") {
		t.Errorf("a keyed body with invalid UTF-8 in a text: %d %q %s, want 400 invalid_request", a.status, a.code, a.body)
	}
	if diff := cmp.Diff([]int{2, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}
