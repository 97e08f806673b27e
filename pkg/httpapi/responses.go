package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// turn is what the gateway keeps of a Responses answer (store: true), in
// the idempotency store for its window: the response object, for GET
// /api/v1/responses/{id}, and the conversation so far (Chat Completions
// messages: the previous turns', this turn's input and its output, without
// the instructions, which do not carry over), for previous_response_id.
type turn struct {
	Response json.RawMessage   `json:"response"`
	Messages []json.RawMessage `json:"messages"`
}

// turnKey is where a project's response id is kept: scoped to the project,
// so that another project never reads it.
func turnKey(project, responseID string) string {
	h := sha256.Sum256([]byte("responses turn\x00" + project + "\x00" + responseID))
	return hex.EncodeToString(h[:])
}

// responsesAPI is OpenAI's Responses API (POST /api/v1/responses).
func (s *Server) responsesAPI() clientAPI {
	return clientAPI{
		prepare:   s.prepareResponses,
		errorf:    writeError,
		scope:     "/api/v1/responses\x00",
		proto:     llm.ProtoResponses,
		hints:     rsIgnoredFields,
		owned:     []string{"model", "stream", "gateway", "provider"},
		notNative: []string{"previous_response_id"},
		passCodec: func(id string, req *llm.ChatRequest, keyed bool) gateway.Codec {
			return &responsesCodec{requestID: id, req: req, model: req.Model + req.Suffix, keyed: keyed, createdAt: s.now().Unix()}
		},
	}
}

// prepareResponses decodes a Responses request and returns its codec, which
// keeps the new turn (unless store is false) right after the answer is
// priced. A request with a previous_response_id continues the kept turn of
// that response: resolve reads it and returns the whole conversation, after
// the idempotency lookup, so that a retry of a keyed request that answered
// gets its stored answer even once that turn is no longer kept (its window
// ends before the retry's record's).
func (s *Server) prepareResponses(p *principal, id string, body []byte) ([]byte, codecFunc, func(context.Context) ([]byte, error), error) {
	rr, err := decodeResponses(body, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if rr.PreviousResponseID != "" && s.idem == nil {
		return nil, nil, nil, llm.Errorf(llm.CodeInvalidRequest, "previous_response_id", "this gateway keeps no responses")
	}
	// prior is the conversation before this turn, set by resolve; the
	// codec's turn keeping reads it once the answer is in.
	var prior []json.RawMessage
	var resolve func(context.Context) ([]byte, error)
	chat := rr.Chat
	if rr.PreviousResponseID != "" {
		if chat, err = rr.preview(); err != nil {
			return nil, nil, nil, err
		}
		resolve = func(ctx context.Context) ([]byte, error) {
			raw, err := s.idem.Kept(ctx, turnKey(p.Project.ID, rr.PreviousResponseID))
			switch {
			case errors.Is(err, idempotency.ErrNotFound):
				return nil, llm.Errorf(llm.CodeInvalidRequest, "previous_response_id", "previous response %q not found (responses are kept for the idempotency window)", sanitize(rr.PreviousResponseID))
			case err != nil:
				return nil, storeUnavailable(err)
			}
			var t turn
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, storeUnavailable(err)
			}
			prior = t.Messages
			if prior == nil {
				prior = []json.RawMessage{}
			}
			whole, err := decodeResponses(body, prior)
			if err != nil {
				return nil, err
			}
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
		if rr.Store && s.idem != nil {
			c.turn = func(response json.RawMessage, output []json.RawMessage, _ llm.Usage) {
				msgs := append(append(append([]json.RawMessage(nil), prior...), rr.Input...), output...)
				b, err := json.Marshal(turn{Response: response, Messages: msgs})
				if err != nil {
					return
				}
				key := turnKey(p.Project.ID, c.responseID())
				s.fin.Do("responses turn", func(ctx context.Context) error { return s.idem.Keep(ctx, key, p.Project.ID, b) }, nil)
			}
		}
		return c
	}
	return chat, mk, resolve, nil
}

func storeUnavailable(err error) error {
	return &llm.Error{Code: llm.CodeStoreUnavailable, Message: "the idempotency store cannot be reached; retry shortly", RetryAfter: time.Second, Cause: err}
}

// getResponse serves GET /api/v1/responses/{id}: a kept response of the
// caller's own project.
func (s *Server) getResponse(w *recorder, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/api/v1/responses/")
	notFound := llm.Errorf(llm.CodeNotFound, "", "no response %q in this project (responses are kept for the idempotency window when store is true)", sanitize(id))
	if id == "" || strings.Contains(id, "/") || s.idem == nil {
		writeError(w, notFound)
		return
	}
	raw, err := s.idem.Kept(r.Context(), turnKey(p.Project.ID, id))
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		writeError(w, notFound)
		return
	case err != nil:
		writeError(w, storeUnavailable(err))
		return
	}
	var t turn
	if err := json.Unmarshal(raw, &t); err != nil || len(t.Response) == 0 {
		writeError(w, notFound)
		return
	}
	b := append([]byte(t.Response), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
