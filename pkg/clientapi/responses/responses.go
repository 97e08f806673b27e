// Package responses is OpenAI's Responses API as a client API: its
// descriptor (Service.API, made by New with its dependencies), the codec
// and the handling of an answer passed through, and the kept turns behind
// previous_response_id and GET /api/v1/responses/{id} (ServeKept). The
// protocol itself, the translation of a request to the hub and of the
// hub's answer back included, is pkg/wire/responses'.
package responses

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// Deps are what the Responses API needs beyond a request.
type Deps struct {
	// Idempotency keeps and reads the turns; nil: no turn is kept, and a
	// previous_response_id is refused.
	Idempotency *idempotency.Service
	// Now is the clock of the answers' created_at.
	Now func() time.Time
	// Log takes the warning of a turn not kept.
	Log *slog.Logger
	// MaxBodyBytes bounds a continued conversation (server.max_body_bytes).
	MaxBodyBytes int64
}

// Service is the Responses API (POST /api/v1/responses) with its dependencies.
type Service struct {
	idem    *idempotency.Service
	now     func() time.Time
	log     *slog.Logger
	maxBody int64
}

// New returns the Responses API served with d.
func New(d Deps) *Service {
	return &Service{idem: d.Idempotency, now: d.Now, log: d.Log, maxBody: d.MaxBodyBytes}
}

var spec = clientapi.Spec{
	Scope:     "/api/v1/responses\x00",
	Proto:     llm.ProtoResponses,
	Hints:     responseswire.IgnoredFields,
	Owned:     slices.Concat([]string{"model", "stream"}, llm.GatewayFields),
	NotNative: []string{"previous_response_id"},
}

var _ clientapi.API = (*Service)(nil)

// Spec is what the HTTP layer checks of a Responses request.
func (s *Service) Spec() *clientapi.Spec { return &spec }

// WriteError writes err in OpenAI's error envelope.
func (s *Service) WriteError(w http.ResponseWriter, err error) int {
	return clientapi.WriteError(w, err)
}

// ProviderObject finds the first reference in a Responses body to an
// object stored in the provider's account.
func (s *Service) ProviderObject(body []byte) (clientapi.ObjectRef, bool) {
	return providerObject(body)
}

// Codec is the codec of a Responses request passed through. Whether store
// is false is read from the body once the answer is there
// (turnKeeper.keepPassed).
func (s *Service) Codec(p clientapi.Caller, id string, body []byte, req *llm.ChatRequest, keyed bool) gateway.Codec {
	c := &responsesCodec{requestID: id, req: req, keyed: keyed,
		head: responseswire.Head{RequestID: id, Model: req.Model + req.Suffix, CreatedAt: s.now().Unix()}}
	return &turnCodec{responsesCodec: c, k: &turnKeeper{s: s, project: p.Project, want: s.idem != nil, body: body}}
}

// Translate decodes a Responses request. Its codec keeps the new turn
// (unless store is false) right after the answer is priced, and says in
// the answer whether it did (turns.go). A request with a
// previous_response_id continues the conversation that response ends: its
// resolver reads the kept turns and returns the whole conversation, after
// the idempotency lookup, so that a retry of a keyed request that answered
// gets its stored answer even once those turns are no longer kept (their
// windows end before the retry's record's).
func (s *Service) Translate(p clientapi.Caller, _ string, body []byte) (llm.Hub, clientapi.Translation, error) {
	rr, err := responseswire.ToHub(body, nil)
	if err != nil {
		return llm.Hub{}, nil, err
	}
	if rr.PreviousResponseID != "" && s.idem == nil {
		return llm.Hub{}, nil, llm.Errorf(llm.CodeInvalidRequest, "previous_response_id", "this gateway keeps no responses")
	}
	t := &translation{s: s, rr: rr, body: body, project: p.Project,
		k: &turnKeeper{s: s, project: p.Project, want: rr.Store && s.idem != nil, input: rr.Input, inputDone: true}}
	chat := rr.Hub
	if rr.PreviousResponseID != "" {
		if chat, err = rr.Preview(); err != nil {
			return llm.Hub{}, nil, err
		}
	}
	return chat, t, nil
}

// translation is what a Responses request's translation keeps: the
// decoded request, for its codec, and the turn it makes.
type translation struct {
	s       *Service
	rr      *responseswire.HubRequest
	body    []byte
	project string
	k       *turnKeeper
}

func (t *translation) Codec(reqID string, req *llm.ChatRequest, keyed bool) gateway.Codec {
	rr, k := t.rr, t.k
	req.Dropped = append(req.Dropped, rr.Dropped...)
	c := &responsesCodec{requestID: reqID, req: req, keyed: keyed, store: k,
		head: responseswire.Head{RequestID: reqID, Model: req.Model + req.Suffix, CreatedAt: t.s.now().Unix(),
			Metadata: rr.Metadata, Instructions: rr.Instructions, PreviousID: rr.PreviousResponseID,
			EchoToolChoice: rr.EchoToolChoice, EchoParallel: rr.EchoParallel}}
	if k.want {
		c.turn = k
	}
	return &turnCodec{responsesCodec: c, k: k}
}

// Resolver is the request's own when it continues a kept conversation.
func (t *translation) Resolver() gateway.Resolver {
	if t.rr.PreviousResponseID == "" {
		return nil
	}
	return t
}

// Resolve reads the kept turns of the conversation the request continues
// and returns the whole request.
func (t *translation) Resolve(ctx context.Context) (*llm.ChatRequest, error) {
	limit := t.s.maxBody
	conv, err := t.s.conversation(ctx, t.project, t.rr.PreviousResponseID, limit)
	if err != nil {
		return nil, err
	}
	whole, err := responseswire.ToHub(t.body, conv.messages)
	if err != nil {
		return nil, err
	}
	if n := int64(len(whole.Chat)); limit > 0 && n > limit {
		return nil, tooLong(t.rr.PreviousResponseID, n, limit)
	}
	t.k.conv = conv
	return llm.DecodeChatRequest(whole.Chat)
}

func storeUnavailable(err error) error {
	return &llm.Error{Code: llm.CodeStoreUnavailable, Message: "the idempotency store cannot be reached; retry shortly", RetryAfter: time.Second, Cause: err}
}

// ServeKept answers GET /api/v1/responses/{id} for a caller of project: the
// kept response id of that project.
func (s *Service) ServeKept(ctx context.Context, w http.ResponseWriter, project, id string) {
	notFound := llm.Errorf(llm.CodeNotFound, "", "no response %q in this project (a response is kept for the idempotency window only when its answer says \"store\": true)", clientapi.Sanitize(id))
	if id == "" || strings.Contains(id, "/") || s.idem == nil {
		clientapi.WriteError(w, notFound)
		return
	}
	t, err := s.readTurn(ctx, project, id)
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		clientapi.WriteError(w, notFound)
		return
	case err != nil:
		clientapi.WriteError(w, storeUnavailable(err))
		return
	}
	b := append([]byte(t.Response), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
