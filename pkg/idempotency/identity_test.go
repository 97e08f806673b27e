package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
	"github.com/buzzgate/buzzgate/pkg/canonjson"
)

func TestIdentity(t *testing.T) {
	k1 := sha256.Sum256([]byte("sk-one"))
	k2 := sha256.Sum256([]byte("sk-two"))
	base := Identity("proj", k1, "key", "none", "anywhere")
	if base != Identity("proj", k1, "key", "none", "anywhere") {
		t.Fatal("Identity is not deterministic")
	}
	others := map[string]string{
		"project":   Identity("proj2", k1, "key", "none", "anywhere"),
		"api key":   Identity("proj", k2, "key", "none", "anywhere"),
		"idem key":  Identity("proj", k1, "key2", "none", "anywhere"),
		"demand":    Identity("proj", k1, "key", "zdr", "anywhere"),
		"residency": Identity("proj", k1, "key", "none", "eu"),
		// Length prefixes: moving bytes between two parts is another tuple.
		"shifted": Identity("pro", k1, "jkey", "none", "anywhere"),
	}
	for name, id := range others {
		if id == base {
			t.Errorf("another %s gives the same identity", name)
		}
	}
	if len(base) != 64 {
		t.Errorf("identity %q is not a hex SHA-256", base)
	}
}

// Identities and fingerprints are stored: their values never change, a
// key longer than Identity's stack buffer included.
func TestIdentityPinned(t *testing.T) {
	k := sha256.Sum256([]byte("sk-one"))
	fp, err := Fingerprint("POST", "/api/v1/chat/completions", []byte(`{"b":1,"a":[true,null]}`))
	for _, c := range []struct{ got, want string }{
		{Identity("proj", k, "key", "none", "anywhere"), "6426abe0970d23840d6ce57c4af55ac43d92e9c7378bc25db0235b8fc311b5c6"},
		{Identity("proj", k, strings.Repeat("é", 256), "zdr", "eu"), "4a32150d93240e98210bea8c0a3433892c0bff18286b906314a8ae4a1b5a9075"},
		{fp, "5e34006bdc694e91fe4023613b128e6671b1af6eb025bacd9ec64026b338a4d4"},
	} {
		if c.got != c.want || err != nil {
			t.Errorf("got %s (%v), want %s", c.got, err, c.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(method, path, body string) string {
		t.Helper()
		f, err := Fingerprint(method, path, []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return f
	}
	base := fp("POST", "/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	same := []string{
		`{"stream":true,"messages":[{"content":"hi","role":"user"}],"model":"m"}`,
		"{ \"model\" : \"m\",\n \"messages\":[{\"role\":\"user\",\"content\":\"hi\"}], \"stream\":true }",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":false}}`,
		`{"model":"m","messages":[{"role":"user","content":"h\u0069"}],"stream":true}`,
	}
	for _, b := range same {
		if got := fp("POST", "/api/v1/chat/completions", b); got != base {
			t.Errorf("%s: another fingerprint for the same request", b)
		}
	}
	different := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}`,
		`{"model":"m:floor","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true,"x":1}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"gateway":{}}`,
	}
	for _, b := range different {
		if got := fp("POST", "/api/v1/chat/completions", b); got == base {
			t.Errorf("%s: the same fingerprint for another request", b)
		}
	}
	if fp("POST", "/api/v1/responses", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`) == base {
		t.Error("another path gives the same fingerprint")
	}
	if _, err := Fingerprint("POST", "/x", []byte(`{"a":1,"a":2}`)); err == nil {
		t.Error("a body with duplicate keys is ambiguous and must not get a fingerprint")
	}
}

// Fingerprints are stored with their records (in DynamoDB, across deploys):
// the same body must keep the same fingerprint, or a retry after a deploy
// would be refused as another request.
func TestFingerprintStable(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
			"029a16789901d63a0b30ca5fd2f5170d9c4c52cf290c53caada2721f9a85ce5a"},
		{`{"model":"m","messages":[{"role":"user","content":"Zo\u00e9 \"q\" \ud83d\ude00 \n\t\/ <&>"}],"stream_options":{"include_usage":true},"temperature":0.50,"n":1e2}`,
			"9d82a5a4874b662b54fe9ed12f1186f094a22dc89082b46929fcc5ed934f1524"},
	} {
		got, err := Fingerprint("POST", "/api/v1/chat/completions", []byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("%s: fingerprint %s, %v; want %s", c.body, got, err, c.want)
		}
	}
	// A large body: the SHA-256 of the length-prefixed method, path and
	// canonical body.
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128,"stream_options":{"include_usage":true}`)
	canon, err := canonjson.CanonicalizeWithout(body, "stream_options", "include_usage")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("POST"), []byte("/api/v1/chat/completions"), canon} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":"))
		h.Write(part)
	}
	if got, err := Fingerprint("POST", "/api/v1/chat/completions", body); err != nil || got != hex.EncodeToString(h.Sum(nil)) {
		t.Errorf("1 MB body: fingerprint %s, %v; want %x", got, err, h.Sum(nil))
	}
}

// BenchmarkFingerprint: a coding agent's 1 MB body.
func BenchmarkFingerprint(b *testing.B) {
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fingerprint("POST", "/api/v1/chat/completions", body); err != nil {
			b.Fatal(err)
		}
	}
}
