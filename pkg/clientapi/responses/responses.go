// Package responses is OpenAI's Responses API as a client API: its
// descriptor (Service.API, made by New with its dependencies), the decoder
// that translates a request to Chat Completions, the codec, the handling of
// an answer passed through, and the kept turns behind previous_response_id
// and GET /api/v1/responses/{id} (ServeKept).
package responses

import (
	"context"
	"encoding/json"
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

// API is the Responses API's descriptor.
func (s *Service) API() clientapi.API {
	return clientapi.API{
		Prepare:   s.prepareResponses,
		Errorf:    clientapi.WriteError,
		Scope:     "/api/v1/responses\x00",
		Proto:     llm.ProtoResponses,
		Hints:     rsIgnoredFields,
		Owned:     slices.Concat([]string{"model", "stream"}, llm.GatewayFields),
		NotNative: []string{"previous_response_id"},

		ProviderObject: providerObject,
		PassCodec: func(p clientapi.Caller, id string, body []byte, req *llm.ChatRequest, keyed bool) gateway.Codec {
			c := &responsesCodec{requestID: id, req: req, model: req.Model + req.Suffix, keyed: keyed, createdAt: s.now().Unix()}
			// Whether store is false is read from the body once the
			// answer is there (turnKeeper.keepPassed).
			return &turnCodec{responsesCodec: c, k: &turnKeeper{s: s, project: p.Project, want: s.idem != nil, body: body}}
		},
	}
}

// prepareResponses decodes a Responses request and returns its codec, which
// keeps the new turn (unless store is false) right after the answer is
// priced, and says in the answer whether it did (turns.go). A request with
// a previous_response_id continues the conversation that response ends:
// resolve reads its kept turns and returns the whole conversation, after
// the idempotency lookup, so that a retry of a keyed request that answered
// gets its stored answer even once those turns are no longer kept (their
// windows end before the retry's record's).
func (s *Service) prepareResponses(p clientapi.Caller, id string, body []byte) ([]byte, clientapi.CodecFunc, func(context.Context) ([]byte, error), error) {
	rr, err := decodeResponses(body, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if rr.PreviousResponseID != "" && s.idem == nil {
		return nil, nil, nil, llm.Errorf(llm.CodeInvalidRequest, "previous_response_id", "this gateway keeps no responses")
	}
	k := &turnKeeper{s: s, project: p.Project, want: rr.Store && s.idem != nil, input: rr.Input, inputDone: true}
	var resolve func(context.Context) ([]byte, error)
	chat := rr.Chat
	if rr.PreviousResponseID != "" {
		if chat, err = rr.preview(); err != nil {
			return nil, nil, nil, err
		}
		limit := s.maxBody
		resolve = func(ctx context.Context) ([]byte, error) {
			conv, err := s.conversation(ctx, p.Project, rr.PreviousResponseID, limit)
			if err != nil {
				return nil, err
			}
			whole, err := decodeResponses(body, conv.messages)
			if err != nil {
				return nil, err
			}
			if n := int64(len(whole.Chat)); limit > 0 && n > limit {
				return nil, tooLong(rr.PreviousResponseID, n, limit)
			}
			k.conv = conv
			return whole.Chat, nil
		}
	}
	mk := func(reqID string, req *llm.ChatRequest, keyed bool) gateway.Codec {
		req.Dropped = append(req.Dropped, rr.Dropped...)
		c := &responsesCodec{requestID: reqID, req: req, model: req.Model + req.Suffix, keyed: keyed,
			metadata: rr.Metadata, instructions: rr.Instructions, previousID: rr.PreviousResponseID, createdAt: s.now().Unix(),
			echoToolChoice: rr.EchoToolChoice, echoParallel: rr.EchoParallel}
		c.store = func(final bool) bool {
			if final {
				return k.kept
			}
			return k.want
		}
		if k.want {
			c.turn = func(response json.RawMessage, output []json.RawMessage, _ llm.Usage) {
				k.keep(c.responseID(), response, output)
			}
		}
		return &turnCodec{responsesCodec: c, k: k}
	}
	return chat, mk, resolve, nil
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
