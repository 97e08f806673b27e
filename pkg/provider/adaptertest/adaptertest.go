// Package adaptertest is the contract every upstream adapter (an
// llm.Provider and its llm.ChunkStream) passes: each adapter's package runs
// Run from a test, with a function that wires the adapter to an upstream
// that behaves as a protocol-neutral Script says. It is imported by tests
// only.
//
// What the suite pins down, for every adapter:
//
//   - An answer's chunks are Chat Completions chunks, in the upstream's
//     order: the text pieces or the tool call as scripted, Output true on
//     exactly the chunks that carry output (and the other fields the router
//     reads true to the chunk's JSON), one finish_reason with Chat
//     Completions' value after the last output, the usage as reported, then
//     io.EOF at the stream's proper end and on every later Next.
//   - A stream that stops without its end marker ends with llm.ErrStreamCut;
//     an error event, a malformed event or a broken connection with a
//     transient *llm.ProviderError.
//   - A failure before the answer is a *llm.ProviderError of the class the
//     router acts on: 429 throttled (with its retry hint), 400 rejected
//     (with the upstream's message), 401, 403 and a 404 about the route's
//     model the provider's configuration, a 404 about an object the
//     request named rejected (with the upstream's message), any other
//     status (a redirect included: it is not followed) and a connection
//     failure transient; ChatStream returns no stream with it.
//   - One ChatStream is one upstream call: an adapter never retries.
//   - The caller's context ending while the adapter waits (for the answer's
//     head, for a chunk) ends the wait at once with the context's error (not
//     a *llm.ProviderError, which would count against the provider), and
//     the connection is closed: no goroutine is left behind. Close unblocks
//     a waiting Next the same way and is idempotent; Ready (when the stream
//     has it) is never true before a Next that waits.
//   - The upstream receives the route's model and the client's fields; a
//     field its protocol cannot express and that would change the answer
//     (stop sequences, for an upstream without them) is refused as the
//     upstream's own 400 would be (FailRejected), without a call.
//
// A world that cannot script something (the simulated provider has no HTTP
// status but 400, 429 and one 5xx) says so in Adapter.Cannot: a case that
// needs it is skipped with the reason logged, and a check that needs it is
// left out with a log line, so that a gap is always visible in go test -v.
//
// A new adapter joins with a contract_test.go in its package that calls Run
// with its New and its Cannot; an adapter of a Chat Completions or a
// Messages upstream builds its world with NewFake, one of a Responses
// upstream with NewResponsesFake, one of another protocol maps a Script
// onto a fake upstream of its own.
//
// Every case checks that it left no goroutine behind (go.uber.org/goleak),
// so the suite runs its cases one at a time.
package adaptertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Adapter is an adapter under test.
type Adapter struct {
	// New returns the adapter wired to an upstream that behaves as s says.
	// It is called once per case; whatever it starts is stopped by
	// t.Cleanup, idle connections of its HTTP client included.
	New func(t *testing.T, s Script) Upstream
	// Cannot names what the adapter's upstream cannot be made to do, each
	// with the reason. New is never given a Script that needs one of them.
	Cannot map[Feature]string
}

// Upstream is an adapter wired to its upstream.
type Upstream struct {
	Provider llm.Provider
	// Calls returns the number of calls the upstream received so far. It is
	// nil when Cannot has CallCount.
	Calls func() int
	// Received returns the requests the upstream received, in order. It is
	// nil when Cannot has ObservedRequest.
	Received func() []Received

	// noStop: the suite sends ClientBodyNoStop (Cannot has StopSequences).
	noStop bool
}

// Feature is something of a Script that not every upstream can be made to
// do.
type Feature string

// The features a world may lack.
const (
	// ScriptedText: the answer's text pieces as scripted (without it, the
	// number of pieces only).
	ScriptedText Feature = "scripted text"
	// EmptyAnswer: an answer with no text at all.
	EmptyAnswer Feature = "empty answer"
	// ToolCalls: an answer that is a tool call.
	ToolCalls Feature = "tool calls"
	// FinishReasons: a finish other than FinishStop.
	FinishReasons Feature = "finish reasons"
	// ScriptedUsage: the token counts as scripted (without it, some counts).
	ScriptedUsage Feature = "scripted usage"
	// OmittedUsage: an answer without usage.
	OmittedUsage Feature = "omitted usage"
	// EarlyUsage: usage reported before the answer's end (the prompt's
	// tokens at its start, as Anthropic reports them), so that a stream cut
	// short is billed on counts (llm.StreamReport), not on an estimate.
	EarlyUsage Feature = "usage before the end"
	// RetryAfterHint: a 429's retry hint as scripted.
	RetryAfterHint Feature = "retry-after hint"
	// ErrorMessage: a 400's message as scripted.
	ErrorMessage Feature = "error message"
	// ConnectionFailure: a refused connection, a connection reset before
	// the answer.
	ConnectionFailure Feature = "connection failure"
	// Cuts: an answer whose stream stops (cleanly, aborted, reset) before
	// its end, or without its end marker.
	Cuts Feature = "cut streams"
	// EndMarker: a stream end marker apart from the answer's finish
	// ("data: [DONE]", message_stop), which a stream may leave out. A
	// protocol whose finishing event is its end (Responses'
	// response.completed) has none.
	EndMarker Feature = "end marker"
	// StopSequences: stop sequences. Without them the suite's requests
	// have none (ClientBodyNoStop), and the adapter must refuse one.
	StopSequences Feature = "stop sequences"
	// MalformedEvents: an event that is not the protocol's.
	MalformedEvents Feature = "malformed events"
	// KeepAlives: an event that carries no chunk before a stall.
	KeepAlives Feature = "keep-alive events"
	// ErrorEvents: an error event inside the stream.
	ErrorEvents Feature = "error events"
	// JSONAnswer: a whole JSON answer to a streaming request (an upstream
	// that ignored "stream": true).
	JSONAnswer Feature = "JSON answers"
	// CallCount: counting the upstream's calls (Upstream.Calls).
	CallCount Feature = "call count"
	// ObservedRequest: the request the upstream received
	// (Upstream.Received).
	ObservedRequest Feature = "observed request"
	// PassThrough: the upstream receives the client's body byte for byte,
	// as a Chat Completions upstream does (a translating adapter lacks it
	// by design).
	PassThrough Feature = "pass-through body"
)

// Status is the feature of answering with HTTP status code.
func Status(code int) Feature { return Feature(fmt.Sprintf("status %d", code)) }

// Script is what the upstream does with the one call it gets. The zero
// Script is an empty answer with no usage; the suite always sets Text or
// ToolCall.
type Script struct {
	// Text holds the answer's text pieces, one upstream event each.
	Text []string
	// ToolCall, if set, is the answer instead of Text.
	ToolCall *ToolCall
	// Finish is how the answer ends; "" means FinishStop.
	Finish Finish
	// Usage is the token counts the upstream reports; nil reports none.
	Usage *Usage

	// Status, if not 0 or 200, is the answer's status, with an error body
	// in the protocol's envelope whose message is ErrorMessage, and a
	// retry-after header of RetryAfter (whole seconds) when it is set. A
	// 3xx redirects to the URL called, where the same answer waits.
	Status       int
	ErrorMessage string
	RetryAfter   time.Duration
	// Missing, with Status 404, is what the 404 says is missing, in the
	// protocol's own words (the message is then not ErrorMessage).
	Missing Missing
	// Refused: nothing listens at the upstream's address.
	Refused bool
	// Reset: the upstream reads the request and resets the connection.
	Reset bool
	// Hang: the upstream reads the request and never answers.
	Hang bool

	// Cut, unless NoCut, stops the answer after CutAfter output pieces (0:
	// right after the answer's head and its opening event, if the protocol
	// has one).
	Cut      CutMode
	CutAfter int
	// KeepAlive, with Cut CutStall, sends an event that carries no chunk
	// (an empty data line in Chat Completions, a ping in Messages) right
	// before the stall.
	KeepAlive bool
	// NoEnd leaves out the stream's end marker ("data: [DONE]",
	// message_stop) after a complete answer.
	NoEnd bool
	// JSON answers with one JSON body (application/json) instead of a
	// stream.
	JSON bool
}

// Missing is what an upstream's 404 says is missing.
type Missing int

const (
	// MissingModel: the route's model (Anthropic's "model: <name>",
	// OpenAI's code model_not_found): the operator's configuration.
	MissingModel Missing = iota
	// MissingReference: an object the request named (Anthropic's "File not
	// found: file_...", OpenAI's "Conversation with id 'conv_...' not
	// found."): the client's.
	MissingReference
)

// ToolCall is a function call the answer makes.
type ToolCall struct{ ID, Name, Arguments string }

// Usage is token counts.
type Usage struct{ Prompt, Completion int }

// CutMode is how Script.Cut stops an answer.
type CutMode int

const (
	// NoCut: the answer is whole.
	NoCut CutMode = iota
	// CutClose ends the body cleanly, without the rest.
	CutClose
	// CutAbort closes the connection in the middle of the body's framing.
	CutAbort
	// CutReset resets the connection.
	CutReset
	// CutError sends the protocol's error event and ends the body.
	CutError
	// CutMalformed sends an event that is not valid JSON and ends the body;
	// with JSON, the whole body is not valid JSON.
	CutMalformed
	// CutStall sends nothing more and keeps the connection open.
	CutStall
)

// Finish is how an answer ends, in neutral terms.
type Finish string

// The finishes the suite scripts.
const (
	FinishStop          Finish = "stop"
	FinishStopSequence  Finish = "stop sequence"
	FinishLength        Finish = "length"
	FinishToolCalls     Finish = "tool calls"
	FinishContentFilter Finish = "content filter"
)

// ChatCompletions is the finish_reason a Chat Completions client gets.
func (f Finish) ChatCompletions() string {
	switch f {
	case FinishLength:
		return "length"
	case FinishToolCalls:
		return "tool_calls"
	case FinishContentFilter:
		return "content_filter"
	}
	return "stop"
}

// Received is a request as the upstream received it, read by the world in
// its protocol's terms.
type Received struct {
	// Body is the request body as received.
	Body []byte
	// Model is the model named.
	Model string
	// Stream is whether a streamed answer was asked for.
	Stream bool
	// System is the system prompt.
	System string
	// Messages are the conversation's other turns, their text joined.
	Messages []Message
	// MaxTokens is the cap on the answer's tokens.
	MaxTokens int
	// Temperature is the sampling temperature, or nil.
	Temperature *float64
	// Stop is the stop sequences.
	Stop []string
	// Tools is the names of the functions offered.
	Tools []string
}

// Message is one turn of a conversation.
type Message struct{ Role, Text string }

// Run runs the contract suite against a, one subtest per case.
func Run(t *testing.T, a Adapter) {
	t.Helper()
	if a.New == nil {
		t.Fatal("adaptertest: Adapter.New is nil")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range c.needs {
				if why, ok := a.Cannot[f]; ok {
					t.Skipf("skipped, needs %s: %s", f, why)
				}
			}
			checkNoLeaks(t)
			c.run(&world{Adapter: a, t: t})
		})
	}
	if len(a.Cannot) > 0 {
		gaps := make([]string, 0, len(a.Cannot))
		for f, why := range a.Cannot {
			gaps = append(gaps, fmt.Sprintf("%s (%s)", f, why))
		}
		slices.Sort(gaps)
		t.Logf("not checked, the upstream cannot do them: %s", strings.Join(gaps, "; "))
	}
}

// world is one case's adapter.
type world struct {
	Adapter
	t *testing.T
}

// can reports whether the world has f, and logs what is not checked when
// it does not.
func (w *world) can(f Feature, unchecked string) bool {
	w.t.Helper()
	if why, ok := w.Cannot[f]; ok {
		w.t.Logf("not checked: %s (no %s: %s)", unchecked, f, why)
		return false
	}
	return true
}

// start wires the adapter to an upstream that behaves as s says.
func (w *world) start(s Script) Upstream {
	w.t.Helper()
	up := w.New(w.t, s)
	if up.Provider == nil {
		w.t.Fatal("adaptertest: Adapter.New returned no Provider")
	}
	if _, ok := w.Cannot[CallCount]; !ok && up.Calls == nil {
		w.t.Fatal("adaptertest: Adapter.New returned no Calls, and Cannot does not have CallCount")
	}
	if _, ok := w.Cannot[ObservedRequest]; !ok && up.Received == nil {
		w.t.Fatal("adaptertest: Adapter.New returned no Received, and Cannot does not have ObservedRequest")
	}
	_, up.noStop = w.Cannot[StopSequences]
	return up
}
