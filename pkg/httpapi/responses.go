package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// responsesAPI is OpenAI's Responses API (POST /api/v1/responses).
func (s *Server) responsesAPI() clientapi.API {
	return clientapi.API{
		Prepare:   s.prepareResponses,
		Errorf:    clientapi.WriteError,
		Scope:     "/api/v1/responses\x00",
		Proto:     llm.ProtoResponses,
		Hints:     rsIgnoredFields,
		Owned:     []string{"model", "stream", "gateway", "provider"},
		NotNative: []string{"previous_response_id"},
		PassCodec: func(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
			return &responsesCodec{requestID: id, req: req, model: req.Model + req.Suffix, keyed: keyed, createdAt: s.now().Unix()}
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
func (s *Server) prepareResponses(p clientapi.Caller, id string, body []byte) ([]byte, clientapi.CodecFunc, func(context.Context) ([]byte, error), error) {
	rr, err := decodeResponses(body, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if rr.PreviousResponseID != "" && s.idem == nil {
		return nil, nil, nil, llm.Errorf(llm.CodeInvalidRequest, "previous_response_id", "this gateway keeps no responses")
	}
	k := &turnKeeper{s: s, project: p.Project, want: rr.Store && s.idem != nil, input: rr.Input}
	var resolve func(context.Context) ([]byte, error)
	chat := rr.Chat
	if rr.PreviousResponseID != "" {
		if chat, err = rr.preview(); err != nil {
			return nil, nil, nil, err
		}
		limit := s.cfg.Server.MaxBodyBytes
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
		if req.ChatErr == nil {
			req.Dropped = append(req.Dropped, rr.Dropped...)
		}
		c := &responsesCodec{requestID: reqID, req: req, model: req.Model + req.Suffix, keyed: keyed,
			metadata: rr.Metadata, instructions: rr.Instructions, previousID: rr.PreviousResponseID, createdAt: s.now().Unix(),
			echoToolChoice: rr.EchoToolChoice, echoParallel: rr.EchoParallel}
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

// getResponse serves GET /api/v1/responses/{id}: a kept response of the
// caller's own project.
func (s *Server) getResponse(w *clientapi.Recorder, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		clientapi.WriteError(w, err)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/api/v1/responses/")
	notFound := llm.Errorf(llm.CodeNotFound, "", "no response %q in this project (a response is kept for the idempotency window only when its answer says \"store\": true)", sanitize(id))
	if id == "" || strings.Contains(id, "/") || s.idem == nil {
		clientapi.WriteError(w, notFound)
		return
	}
	t, err := s.readTurn(r.Context(), p.Project.ID, id)
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
