package clientapi

import (
	"errors"
	"net/http"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// stubAPI is a client API of the Messages protocol whose codecs say which
// one encoded an answer.
type stubAPI struct {
	translations *int
	refuse       error
}

func (stubAPI) Spec() *Spec                                     { return &Spec{Proto: llm.ProtoMessages} }
func (stubAPI) WriteError(w http.ResponseWriter, err error) int { return WriteError(w, err) }
func (stubAPI) ProviderObject([]byte) (ObjectRef, bool)         { return ObjectRef{}, false }

func (a stubAPI) Translate(Caller, string, []byte) (llm.Hub, Translation, error) {
	*a.translations++
	if a.refuse != nil {
		return llm.Hub{}, nil, a.refuse
	}
	return llm.HubOf([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)), stubTranslation{}, nil
}

func (stubAPI) Codec(_ Caller, id string, _ []byte, req *llm.ChatRequest, _ bool) gateway.Codec {
	return stubCodec("pass")
}

type stubTranslation struct{}

func (stubTranslation) Codec(string, *llm.ChatRequest, bool) gateway.Codec {
	return stubCodec("translated")
}
func (stubTranslation) Resolver() gateway.Resolver { return nil }

// stubCodec encodes an answer as an error naming itself.
type stubCodec string

func (c stubCodec) Answer(*router.Answer, gateway.Emitter) gateway.Result {
	return gateway.Result{Err: errors.New(string(c))}
}
func (c stubCodec) JoinBroken(string) idempotency.Event { return idempotency.Event{Name: string(c)} }

// TestNative: a request kept in its own protocol is translated once, only
// when its Chat Completions form is asked for, with the hints it drops;
// each answer is encoded by the codec of its protocol; a refused
// translation leaves the request to the routes of its own protocol.
func TestNative(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":5,"messages":[]}`)
	members, err := llm.RequestMembers(body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	req, err := llm.NewRoutingRequest(members, len(body))
	if err != nil {
		t.Fatal(err)
	}
	native := NewNative(stubAPI{translations: &n}, Caller{Project: "p"}, "req_1", body, []string{"metadata"}, req, false)
	if got := native.Answer(&router.Answer{Proto: llm.ProtoMessages}, nil).Err.Error(); got != "pass" || n != 0 {
		t.Fatalf("a passed-through answer: codec %q after %d translations, want pass after none", got, n)
	}
	for range 2 {
		if _, err := req.UpstreamBody("up"); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 || len(req.Dropped) != 1 || req.Dropped[0] != "metadata" {
		t.Errorf("%d translations, dropped %v; want one, [metadata]", n, req.Dropped)
	}
	if got := native.Answer(&router.Answer{Proto: llm.ProtoChat, Translation: req.Translation()}, nil).Err.Error(); got != "translated" {
		t.Errorf("a translated answer: codec %q", got)
	}
	if got := native.JoinBroken("x").Name; got != "pass" {
		t.Errorf("a broken join: codec %q, want the pass-through's", got)
	}

	req, err = llm.NewRoutingRequest(members, len(body))
	if err != nil {
		t.Fatal(err)
	}
	refused := NewNative(stubAPI{translations: &n, refuse: llm.Errorf(llm.CodeInvalidRequest, "thinking", "no")}, Caller{}, "req_2", body, nil, req, true)
	if _, err := req.UpstreamBody("up"); llm.AsError(err).Param != "thinking" || req.ChatErr == nil {
		t.Errorf("a refused translation: %v, ChatErr %v", err, req.ChatErr)
	}
	if got := refused.Answer(&router.Answer{Proto: llm.ProtoChat, Translation: req.Translation()}, nil).Err.Error(); got != "pass" {
		t.Errorf("no translation: codec %q, want pass", got)
	}
}
