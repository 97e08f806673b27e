package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// CompletionSize is the size in bytes of the non-streaming answer.
const CompletionSize = 448

const (
	completionID = "chatcmpl-loadbench0000000000000000001"
	created      = 1767225600
	model        = "gpt-4o-mini-2024-07-18"
	fingerprint  = "fp_loadbench"
	promptTokens = 12
)

// words is the answer's text, cut to fit CompletionSize by answerText.
const words = "Load benchmarks measure what a gateway adds to every request: parsing, " +
	"routing, metering and copying the answer back. This reply is fixed so that " +
	"every run compares like with like, across rates, keys, replays and streams, " +
	"and across builds of the gateway, before and after each optimization lands. " +
	"It carries no meaning beyond its length and shape, and repeats: load load load " +
	"load load load load load load load load load load load load load load load load"

func usageOf(text string) json.RawMessage {
	n := int64(len(strings.Fields(text)))
	b, err := json.Marshal(chat.Usage{PromptTokens: promptTokens, CompletionTokens: n, TotalTokens: promptTokens + n})
	if err != nil {
		panic(err)
	}
	return b
}

func marshalCompletion(text string) []byte {
	stop := chat.FinishStop
	b, err := json.Marshal(chat.Completion{
		ID: completionID, Object: chat.ObjectCompletion, Created: created, Model: model,
		Choices: []chat.Choice{{Message: chat.Message{Role: chat.RoleAssistant, Content: &text}, FinishReason: &stop}},
		Usage:   usageOf(text), SystemFingerprint: fingerprint,
	})
	if err != nil {
		panic(err)
	}
	return b
}

// answerText is the longest prefix of words (then padded with dots) whose
// completion is exactly CompletionSize bytes.
func answerText() string {
	for n := len(words); n > 0; n-- {
		text := strings.TrimRight(words[:n], " ")
		b := marshalCompletion(text)
		if len(b) > CompletionSize {
			continue
		}
		for len(b) < CompletionSize {
			text += "."
			b = marshalCompletion(text)
		}
		if len(b) == CompletionSize {
			return text
		}
	}
	panic("no answer text fits")
}

// sseEvents returns the answer as Chat Completions chunks, each a complete
// "data: ...\n\n" event: a role chunk, the text in chunks of chunkWords
// words each (with the space before a word; 0: the whole text in one
// chunk), a finish chunk, the usage chunk when withUsage, and [DONE].
func sseEvents(text string, withUsage bool, chunkWords int) [][]byte {
	event := func(c chat.Chunk) []byte {
		c.ID, c.Object, c.Created, c.Model, c.SystemFingerprint = completionID, chat.ObjectChunk, created, model, fingerprint
		if c.Choices == nil {
			c.Choices = []chat.ChunkChoice{}
		}
		b, err := json.Marshal(c)
		if err != nil {
			panic(err)
		}
		return []byte("data: " + string(b) + "\n\n")
	}
	// choice is one choice with content and finish_reason, and logprobs
	// null as OpenAI writes it.
	choice := func(d chat.Delta, content string, finish *string) []chat.ChunkChoice {
		d.Content = &content
		return []chat.ChunkChoice{{Delta: d, Logprobs: null, FinishReason: finish}}
	}
	var events [][]byte
	events = append(events, event(chat.Chunk{Choices: choice(chat.Delta{Role: chat.RoleAssistant}, "", nil)}))
	fields := strings.Fields(text)
	if chunkWords <= 0 {
		chunkWords = len(fields)
	}
	for i := 0; i < len(fields); i += chunkWords {
		part := strings.Join(fields[i:min(i+chunkWords, len(fields))], " ")
		if i > 0 {
			part = " " + part
		}
		events = append(events, event(chat.Chunk{Choices: choice(chat.Delta{}, part, nil)}))
	}
	stop := chat.FinishStop
	events = append(events, event(chat.Chunk{Choices: choice(chat.Delta{}, "", &stop)}))
	if withUsage {
		events = append(events, event(chat.Chunk{Usage: usageOf(text)}))
	}
	return append(events, []byte("data: [DONE]\n\n"))
}

// jsonTrue says whether body has the member "name": true (spaces allowed
// around the colon), a byte search instead of decoding the body: the mock
// only needs "stream" and "include_usage" of the bodies the generator and the
// gateway send (the gateway's: {"model":...,"stream":true,"stream_options":
// {"include_usage":true},...}). A quoted name preceded by a backslash is
// inside a string, not a member.
func jsonTrue(body []byte, name string) bool {
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(name))
		if j < 0 {
			return false
		}
		j += i
		i = j + len(name)
		if j == 0 || body[j-1] != '"' || (j >= 2 && body[j-2] == '\\') || i >= len(body) || body[i] != '"' {
			continue
		}
		k := skipSpace(body, i+1)
		if k >= len(body) || body[k] != ':' {
			continue
		}
		k = skipSpace(body, k+1)
		if bytes.HasPrefix(body[k:], []byte("true")) {
			return true
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

type handler struct {
	completion         []byte
	completionLen      []string // its Content-Length header value
	stream, streamNoUs [][]byte
	joined, joinedNoUs []byte
	flushEach          bool
}

func newHandler(flushEach bool, chunkWords int) *handler {
	text := answerText()
	h := &handler{completion: marshalCompletion(text), flushEach: flushEach}
	h.completionLen = []string{strconv.Itoa(len(h.completion))}
	h.stream, h.streamNoUs = sseEvents(text, true, chunkWords), sseEvents(text, false, chunkWords)
	for _, e := range h.stream {
		h.joined = append(h.joined, e...)
	}
	for _, e := range h.streamNoUs {
		h.joinedNoUs = append(h.joinedNoUs, e...)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "unknown path "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	bp := getBody()
	defer putBody(bp)
	body, err := readAll(r.Body, (*bp)[:0])
	*bp = body[:0]
	if err != nil {
		return
	}
	stream := jsonTrue(body, "stream")
	if !stream && !json.Valid(body) {
		writeError(w, http.StatusBadRequest, "invalid JSON body")
		return
	}
	// The header values are shared slices, set without canonicalizing.
	hdr := w.Header()
	if !stream {
		hdr["Content-Type"] = contentJSON
		hdr["Content-Length"] = h.completionLen
		w.Write(h.completion)
		return
	}
	withUsage := jsonTrue(body, "include_usage")
	hdr["Content-Type"] = contentSSE
	hdr["Cache-Control"] = noCache
	if !h.flushEach {
		if withUsage {
			w.Write(h.joined)
		} else {
			w.Write(h.joinedNoUs)
		}
		return
	}
	events := h.streamNoUs
	if withUsage {
		events = h.stream
	}
	rc := http.NewResponseController(w)
	for _, e := range events {
		if _, err := w.Write(e); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

var (
	null        = json.RawMessage("null")
	contentJSON = []string{"application/json"}
	contentSSE  = []string{"text/event-stream"}
	noCache     = []string{"no-cache"}
)

// bodies are the request body buffers, reused. Unlike a sync.Pool's, they
// outlive garbage collections: a 1 MB body would otherwise be read, every
// other collection or so, into a buffer grown again from 4 KiB, and the
// direct calls' latency would jump by milliseconds with the mock's
// collector.
var bodies = make(chan *[]byte, 64)

func getBody() *[]byte {
	select {
	case b := <-bodies:
		return b
	default:
		b := make([]byte, 0, 4<<10)
		return &b
	}
}

func putBody(b *[]byte) {
	select {
	case bodies <- b:
	default:
	}
}

// readAll is io.ReadAll into b.
func readAll(r io.Reader, b []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(chat.Error{Error: chat.ErrorBody{Message: msg, Type: "invalid_request_error"}})
	w.Write(b)
}
