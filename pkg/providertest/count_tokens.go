package providertest

import (
	"io"
	"net/http"
	"strconv"

	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// CountTokensPath is the second path a server made by NewAnthropic serves:
// Anthropic's token counting, POST /v1/messages/count_tokens.
const CountTokensPath = messages.PathCountTokens

// CountedTokens is the input_tokens of a count_tokens answer whose Response
// sets no Usage.
const CountedTokens = 37

// countTokens is the state of the count_tokens side, under Server.mu.
type countTokens struct {
	queue []Response
	reqs  []recorded
}

// ScriptCountTokens queues answers for POST /v1/messages/count_tokens, a
// queue apart from the one of /v1/messages (Script). Of a Response it reads
// HeaderDelay, Hang, Reset, Header, and Body or a non-200 Status (an empty
// Body: Anthropic's error envelope), as for a message; otherwise the answer
// is a 200 {"input_tokens":N}, N being Usage.PromptTokens when Usage is set,
// else CountedTokens. When the queue is empty the answer is the zero
// Response's.
func (s *Server) ScriptCountTokens(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.queue = append(s.counts.queue, rs...)
}

// CountTokensRequests returns copies of the count_tokens calls received, in
// arrival order. Calls and Requests count the messages calls only.
func (s *Server) CountTokensRequests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.counts.reqs))
	for i, r := range s.counts.reqs {
		out[i] = newRequest(r.header, r.body)
	}
	return out
}

// serveCountTokens answers POST /v1/messages/count_tokens.
func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, s.requestError("Method "+r.Method+" not allowed", http.StatusMethodNotAllowed))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-request
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, s.errorBody("server closing", http.StatusServiceUnavailable))
		return
	}
	s.handlers.Add(1) // under the lock Close takes before Wait, as in arrive
	s.counts.reqs = append(s.counts.reqs, recorded{header: r.Header.Clone(), body: body})
	var resp Response
	if len(s.counts.queue) > 0 {
		resp = s.counts.queue[0]
		s.counts.queue = s.counts.queue[1:]
	}
	s.mu.Unlock()
	defer s.handlers.Done()

	if resp.Hang || resp.Reset || resp.Body != "" || (resp.Status != 0 && resp.Status != http.StatusOK) {
		s.respond(r.Context(), w, 0, newRequest(r.Header, body), resp) // answers these before any message
		return
	}
	if !s.sleep(r.Context(), resp.HeaderDelay) {
		return
	}
	n := CountedTokens
	if resp.Usage != nil {
		n = resp.Usage.PromptTokens
	}
	count := int64(n)
	b := marshal(messages.TokenCount{InputTokens: &count})
	w.Header().Set("Content-Type", "application/json")
	setHeaders(w, resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
