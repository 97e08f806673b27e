package llm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestNewRoutingRequest checks that a request read from its members
// carries what routing reads, refused as DecodeChatRequest refuses it, and
// that its translation runs once, when its Chat Completions form is needed.
func TestNewRoutingRequest(t *testing.T) {
	tests := []struct {
		name, body string
		param      string // the refused field ("": accepted)
	}{
		{"whole", `{"model":"m:nitro","stream":true,"max_tokens":5,"gateway":{"retry":{"max_total_attempts":3}},"provider":{"only":["a"],"sort":"price"}}`, ""},
		{"no model", `{"stream":true}`, "model"},
		{"model not a string", `{"model":1}`, "model"},
		{"stream not a boolean", `{"model":"m","stream":"yes"}`, "stream"},
		{"bad gateway", `{"model":"m","gateway":{"retry":{"max_total_attempts":9}}}`, "gateway.retry.max_total_attempts"},
		{"bad provider", `{"model":"m","provider":{"sort":"size"}}`, "provider.sort"},
		{"unknown gateway field", `{"model":"m","gateway":{"x":1}}`, "gateway.x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			members, err := RequestMembers([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewRoutingRequest(members, len(tt.body))
			if tt.param != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Param != tt.param {
					t.Fatalf("err = %v, want invalid_request on %s", err, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != "m" || got.Suffix != SuffixNitro || !got.Stream || got.Gateway.MaxTotalAttempts != 3 ||
				len(got.Provider.Only) != 1 || got.Provider.Sort != SortPrice || got.Size() != len(tt.body) {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func TestRoutingRequestTranslatesOnce(t *testing.T) {
	members, err := RequestMembers([]byte(`{"model":"m","system":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	req, err := NewRoutingRequest(members, 26)
	if err != nil {
		t.Fatal(err)
	}
	req.TranslateWith(translatorFunc(func() (*ChatRequest, Translation, error) {
		calls++
		full, err := DecodeChatRequest([]byte(`{"model":"m","messages":[{"role":"system","content":"s"}]}`))
		if full != nil {
			full.Dropped = []string{"hint"}
		}
		return full, "codec", err
	}))
	if calls != 0 || req.Translation() != nil {
		t.Fatalf("translated %d times before a route needed it (translation %v)", calls, req.Translation())
	}
	for range 2 {
		body, err := req.UpstreamBody("up")
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"model":"up","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"s"}]}`; string(body) != want {
			t.Fatalf("body = %s, want %s", body, want)
		}
	}
	if calls != 1 || len(req.Dropped) != 1 || req.Translation() != "codec" {
		t.Errorf("translated %d times, dropped %v, translation %v; want once, [hint], codec", calls, req.Dropped, req.Translation())
	}

	failing, err := NewRoutingRequest(members, 26)
	if err != nil {
		t.Fatal(err)
	}
	failing.TranslateWith(translatorFunc(func() (*ChatRequest, Translation, error) { calls++; return nil, nil, errors.New("refused") }))
	calls = 0
	for range 2 {
		if _, err := failing.UpstreamBody("up"); err == nil {
			t.Fatal("a failed translation gave a body")
		}
	}
	if calls != 1 || failing.ChatErr == nil {
		t.Errorf("failed translation ran %d times, ChatErr %v; want once, set", calls, failing.ChatErr)
	}
}

type translatorFunc func() (*ChatRequest, Translation, error)

func (f translatorFunc) Translate() (*ChatRequest, Translation, error) { return f() }

// TestDecodeRoutingRequest: a whole body read for routing is refused as
// DecodeChatRequest refuses it (the same message), its messages included,
// and what routing reads is read alike.
func TestDecodeRoutingRequest(t *testing.T) {
	for _, body := range []string{
		`{"model":"m:floor","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"provider":{"only":["a"]},"gateway":{"retry":{"max_total_attempts":3}}}`,
		``,
		`{"model":`,
		`[]`,
		`null`,
		`"x"`,
		`{}`,
		`{"model":1,"messages":[]}`,
		`{"model":"m"}`,
		`{"model":"m","messages":null}`,
		`{"model":"m","messages":[]}`,
		`{"model":"m","messages":[1]}`,
		`{"model":"m","messages":[{"content":"hi"}]}`,
		`{"model":"m","messages":[{"role":""}]}`,
		`{"model":"m","messages":[{"role":"user"}],"model":"n"}`,
		`{"model":"m","messages":[{"role":"user","role":"user"}]}`,
		`{"model":"m","messages":[{"role":"user"}],"stream":"yes"}`,
		`{"model":"m","messages":[{"role":"user"}],"provider":{"sort":"size"}}`,
		`{"model":"m","messages":[{"role":"user"}],"gateway":{"x":1}}`,
		`{"model":"m","messages":[{"role":"user"}],"system":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`,
	} {
		want, wantErr := DecodeChatRequest([]byte(body))
		got, err := DecodeRoutingRequest([]byte(body))
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("%.80s: err %v, want %v", body, err, wantErr)
			continue
		}
		if err == nil && (got.Model != want.Model || got.Suffix != want.Suffix || got.Stream != want.Stream ||
			!slices.Equal(got.Provider.Only, want.Provider.Only) || got.Gateway != want.Gateway || got.Size() != len(body)) {
			t.Errorf("%.80s: got %+v, want %+v", body, got, want)
		}
	}
}
