package responses

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// Kept turns: what the gateway keeps of a Responses answer (store true) for
// previous_response_id and GET /api/v1/responses/{id}.
//
// Each turn is kept once, in the idempotency store for its window
// (idempotency.Keep, under max_response_bytes and the memory store's fair
// shares), under a key of the project and the response id (turnKey): its
// response object, its own messages (this turn's input and its output, as
// Chat Completions messages; the instructions do not carry over), its
// depth in the conversation, and the ids of a few turns before it (its
// segment, below), the last of them the response it continued.
//
// Continuing a response reads that turn, then every turn before it, and
// puts their messages back together, oldest first. The turns are read in
// rounds: the turns are cut into segments of turnSegment by depth (1 to
// 16, 17 to 32, ...), and a turn lists the ids from its segment's first
// turn to the one before it, while a segment's first turn lists the whole
// segment before. So the turn continued names the turns back to its
// segment's first; those are read at once, and that first turn names the
// segment before, and so on: a conversation of n turns costs n reads, in
// 1 + ceil((n-1)/16) rounds, while each turn holds at most 16 ids. A
// conversation is continued for at most maxConversationTurns kept turns
// and while what it sends upstream stays within server.max_body_bytes;
// the reads have turnReadTimeout in all.
//
// A turn is kept synchronously, once, between the answer's price and its
// last bytes, within turnKeepTimeout: the answer's response object says
// "store": true only when it was, and false otherwise (store false asked,
// no store, a turn over max_response_bytes, no room, the store down or
// slow). A turn not kept is not tried again later, so that its id is
// consistently unknown.
const (
	// turnFormat is the version of keptTurn. A record of another version
	// (turns live only for the idempotency window) reads as not found.
	turnFormat = 2
	// maxConversationTurns is the most kept turns a request may continue:
	// the reads one request makes.
	maxConversationTurns = 256
	// turnSegment is the length of a segment (see above): the most ids a
	// turn holds, and the most turns read at once.
	turnSegment = 16
	// turnReadTimeout bounds all the reads of one request's conversation.
	turnReadTimeout = 10 * time.Second
	// turnKeepTimeout bounds the keeping of one turn, which the answer's
	// last bytes wait for.
	turnKeepTimeout = 2 * time.Second
)

// keptTurn is one turn as kept.
type keptTurn struct {
	V int `json:"v"`
	// Response is the response object, as GET answers it.
	Response json.RawMessage `json:"response"`
	// N is the turn's depth in its conversation, from 1.
	N int `json:"n"`
	// Before are the ids of the turns before this one from its segment's
	// first turn on, or of the whole segment before for a segment's first
	// turn (segmentBefore), oldest first: the last is the response this one
	// continued.
	Before []string `json:"before,omitempty"`
	// Bytes is the size of the conversation's messages up to this turn's
	// included: the sum of Messages' lengths over every turn.
	Bytes int64 `json:"bytes"`
	// Messages are this turn's own: its input, then its output.
	Messages []json.RawMessage `json:"messages"`
}

// turnKey is where a project's response id is kept: scoped to the project,
// so that another project never reads it.
func turnKey(project, responseID string) string {
	h := sha256.Sum256([]byte("responses turn\x00" + project + "\x00" + responseID))
	return hex.EncodeToString(h[:])
}

func messagesBytes(msgs []json.RawMessage) int64 {
	n := int64(0)
	for _, m := range msgs {
		n += int64(len(m))
	}
	return n
}

// readTurn reads the kept turn of a project's response id; ErrNotFound when
// there is none (never kept, its window ended, dropped to make room, or of
// another format).
func (s *Service) readTurn(ctx context.Context, project, id string) (*keptTurn, error) {
	raw, err := s.idem.Kept(ctx, turnKey(project, id))
	if err != nil {
		return nil, err
	}
	var t keptTurn
	if json.Unmarshal(raw, &t) != nil || t.V != turnFormat || len(t.Response) == 0 || t.N < 1 || len(t.Before) >= t.N {
		return nil, idempotency.ErrNotFound
	}
	return &t, nil
}

// conversation is a resolved previous_response_id: the conversation so far.
type conversation struct {
	messages []json.RawMessage
	// ids are every turn's, oldest first.
	ids   []string
	bytes int64
}

// segmentBefore is the Before of the turn that follows the turns of ids
// (every turn's id, oldest first): the ids from its segment's first turn
// on, or the whole segment before when it is a segment's first turn.
func segmentBefore(ids []string) []string {
	n := len(ids) + 1 // its depth
	start := (n - 1) / turnSegment * turnSegment
	if (n-1)%turnSegment == 0 {
		start = max(n-1-turnSegment, 0)
	}
	return ids[start:]
}

func previousNotFound(id string) error {
	return llm.Errorf(llm.CodeInvalidRequest, "previous_response_id",
		"previous response %q not found (a response is kept for the idempotency window only when its answer says \"store\": true)", clientapi.Sanitize(id))
}

func tooLong(id string, n, limit int64) error {
	return llm.Errorf(llm.CodeInvalidRequest, "previous_response_id",
		"the conversation of previous response %q comes to %d bytes with this request, over the gateway's server.max_body_bytes (%d): send a shorter conversation as input instead",
		clientapi.Sanitize(id), n, limit)
}

// conversation reads the conversation that previous response id ends, for
// project: the turn of id, then the turns before it, a segment at a time.
// maxBytes bounds its messages.
func (s *Service) conversation(ctx context.Context, project, id string, maxBytes int64) (*conversation, error) {
	ctx, cancel := context.WithTimeout(ctx, turnReadTimeout)
	defer cancel()
	last, err := s.readTurn(ctx, project, id)
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		return nil, previousNotFound(id)
	case err != nil:
		return nil, storeUnavailable(err)
	}
	n := last.N
	if n > maxConversationTurns {
		return nil, llm.Errorf(llm.CodeInvalidRequest, "previous_response_id",
			"previous response %q ends a conversation of %d turns; the gateway continues one of at most %d (send the conversation as input instead)",
			clientapi.Sanitize(id), n, maxConversationTurns)
	}
	if maxBytes > 0 && last.Bytes > maxBytes {
		return nil, tooLong(id, last.Bytes, maxBytes)
	}
	turns := make([]*keptTurn, n)
	ids := make([]string, n)
	turns[n-1], ids[n-1] = last, id
	// cur is the turn whose Before is read next: the oldest read so far.
	for cur := last; len(cur.Before) > 0; {
		first := cur.N - len(cur.Before) // the depth of the oldest it names
		segment := turns[first-1 : cur.N-1]
		copy(ids[first-1:], cur.Before)
		missing, err := s.readTurns(ctx, project, cur.Before, segment)
		switch {
		case err != nil:
			return nil, storeUnavailable(err)
		case missing != "":
			return nil, llm.Errorf(llm.CodeInvalidRequest, "previous_response_id",
				"previous response %q cannot be continued: %q, an earlier turn of its conversation, is no longer kept (each turn is kept for the idempotency window from its own answer)",
				clientapi.Sanitize(id), clientapi.Sanitize(missing))
		}
		for i, t := range segment {
			if t.N != first+i {
				return nil, &llm.Error{Code: llm.CodeInternal, Message: "internal error",
					Cause: fmt.Errorf("responses: turn %d of the conversation of %s is kept as turn %d", first+i, id, t.N)}
			}
		}
		cur = segment[0]
	}
	if turns[0] == nil {
		return nil, &llm.Error{Code: llm.CodeInternal, Message: "internal error",
			Cause: fmt.Errorf("responses: the kept turns of %s do not reach its first", id)}
	}
	c := &conversation{ids: ids}
	for _, t := range turns {
		c.messages = append(c.messages, t.Messages...)
		c.bytes += messagesBytes(t.Messages)
	}
	if maxBytes > 0 && c.bytes > maxBytes {
		return nil, tooLong(id, c.bytes, maxBytes)
	}
	return c, nil
}

// readTurns reads the turns of ids into turns[i], all at once. missing is
// the id of a turn not found; err a store failure, or ctx's end.
func (s *Service) readTurns(ctx context.Context, project string, ids []string, turns []*keptTurn) (missing string, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			if turns[i], errs[i] = s.readTurn(ctx, project, ids[i]); errs[i] != nil {
				cancel() // no use reading the rest
			}
		})
	}
	wg.Wait()
	for i, e := range errs {
		if errors.Is(e, idempotency.ErrNotFound) {
			return ids[i], nil
		}
	}
	for _, e := range errs {
		if e != nil {
			return "", e
		}
	}
	return "", nil
}

// turnKeeper keeps one answer's turn, and tells the answer whether it did.
type turnKeeper struct {
	s       *Service
	project string
	// want: store true was asked, and there is a store. For an answer
	// passed through, whose request was not decoded, store false is read
	// from body once the answer is there.
	want bool
	// input is the turn's input as Chat Completions messages, once
	// inputDone; until then, for a request passed through, it is read from
	// body (the client's) when the turn is kept.
	input     []json.RawMessage
	inputDone bool
	body      []byte
	// conv is the conversation the request continues, set by resolve; nil
	// for a first turn.
	conv *conversation
	// kept is set once the turn is kept.
	kept bool
}

// stored is the "store" of a response object: what the request asked
// while the answer runs (final false), whether the turn was kept once it
// is final.
func (k *turnKeeper) stored(final bool) bool {
	if final {
		return k.kept
	}
	return k.want
}

// keepTurn keeps a translated answer's turn (responsesCodec.turn).
func (k *turnKeeper) keepTurn(id string, response json.RawMessage, output []json.RawMessage, _ llm.Usage) {
	k.keep(id, response, output)
}

// keep keeps the turn of response id: its response object and its output
// (Chat Completions messages).
func (k *turnKeeper) keep(id string, response json.RawMessage, output []json.RawMessage) {
	if !k.want {
		return
	}
	resp, err := llm.SetTopLevel(response, map[string][]byte{"store": []byte("true")})
	if err != nil {
		return
	}
	t := keptTurn{V: turnFormat, Response: resp, Messages: append(slices.Clip(k.input), output...)}
	t.N = 1
	if k.conv != nil {
		t.N, t.Before, t.Bytes = len(k.conv.ids)+1, segmentBefore(k.conv.ids), k.conv.bytes
	}
	t.Bytes += messagesBytes(t.Messages)
	b, err := json.Marshal(t)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), turnKeepTimeout)
	defer cancel()
	if err := k.s.idem.Keep(ctx, turnKey(k.project, id), k.project, b); err != nil {
		k.s.log.Warn("responses turn not kept; its answer says store false", "error", err)
		return
	}
	k.kept = true
}

// keepPassed keeps the turn of an answer passed through from a Responses
// upstream, whose response object (the provider's, with its id and the
// gateway's cost) is response, and reports whether it did. The turn is
// kept as a translated one is: its response object, and its input and
// output as Chat Completions messages (the conversation a later
// previous_response_id sends upstream, to a route of any protocol). An
// answer that did not complete or stop short, or whose input or output the
// Chat Completions form cannot hold (a built-in tool's call, say), is not
// kept: its conversation could not be continued as it was.
func (k *turnKeeper) keepPassed(response []byte) bool {
	if !k.want {
		return false
	}
	r, err := responseswire.ReadResponse(bytes.TrimSpace(response), false)
	if err != nil || r.ID == "" || r.Status != responseswire.StatusCompleted && r.Status != responseswire.StatusIncomplete {
		return false
	}
	if !k.inputDone {
		// Split, not decoded: a coding agent's body is large, and it
		// usually asks store false.
		var ms []llm.Member
		if ms, err = llm.Members(k.body); err != nil {
			return false
		}
		var input json.RawMessage
		for _, m := range ms {
			switch m.Key {
			case "store":
				k.want = string(m.Value) != "false"
			case "input":
				input = m.Value
			}
		}
		if !k.want {
			return false
		}
		if k.input, err = responseswire.InputMessages(input); err != nil {
			return false
		}
		k.inputDone = true
	}
	var output []json.RawMessage
	if len(clientapi.Items(r.RawOutput)) > 0 {
		if output, err = responseswire.InputMessages(r.RawOutput); err != nil {
			return false
		}
	}
	k.keep(r.ID, response, output)
	return k.kept
}

// turnCodec is the Responses codec of a request whose turn the gateway may
// keep: every final response object it writes says whether the turn is
// kept ("store"), whether the gateway translated the answer or passed the
// provider's through (passEmitter).
type turnCodec struct {
	*responsesCodec
	k *turnKeeper
}

func (c *turnCodec) Answer(ans *router.Answer, out gateway.Emitter) gateway.Result {
	if ans.Proto == llm.ProtoResponses {
		return c.responsesCodec.Answer(ans, &passEmitter{Emitter: out, k: c.k})
	}
	return c.responsesCodec.Answer(ans, &storeEmitter{Emitter: out, k: c.k})
}

// passEmitter keeps the turn of an answer passed through, once it is
// priced and before its last bytes: the whole response object of a JSON
// answer, or a stream's terminal event, which then says in "store" whether
// the turn was kept (a failed one: false). The stream's earlier events
// say what was asked, as the provider sent them.
type passEmitter struct {
	gateway.Emitter
	k *turnKeeper
}

func (e *passEmitter) Body(b []byte) {
	kept := e.k.keepPassed(bytes.TrimRight(b, "\n"))
	e.Emitter.Body(responseswire.WithStore(b, kept))
}

func (e *passEmitter) Event(ev idempotency.Event, send bool) error {
	switch ev.Name {
	case responseswire.EventCompleted, responseswire.EventIncomplete, responseswire.EventFailed:
		ms, err := llm.Members(ev.Data)
		if err != nil {
			break
		}
		for _, m := range ms {
			if m.Key != "response" {
				continue
			}
			kept := ev.Name != responseswire.EventFailed && e.k.keepPassed(m.Value)
			ev.Data = llm.Splice(ms, len(ev.Data)+8, map[string][]byte{"response": responseswire.WithStore(m.Value, kept)})
			break
		}
	}
	return e.Emitter.Event(ev, send)
}

// storeEmitter sets "store" in the whole response of a translated answer:
// whether the turn was kept, which is known only once the body is written
// (the codec keeps the turn between its price and its bytes). A stream's
// events get it from the codec itself (responsesCodec.store).
type storeEmitter struct {
	gateway.Emitter
	k *turnKeeper
}

func (e *storeEmitter) Body(b []byte) { e.Emitter.Body(responseswire.WithStore(b, e.k.kept)) }
