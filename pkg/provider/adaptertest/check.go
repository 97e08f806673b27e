package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// RouteModel is the route's model name in every request the suite sends.
const RouteModel = "contract-route-model"

// ClientBody is the body of every request the suite sends, as the gateway
// hands it to an adapter: the client's fields with "model" replaced by the
// route's, "stream" true and usage asked for.
const ClientBody = `{"model":"` + RouteModel + `","messages":[` +
	`{"role":"system","content":"Answer in one word."},` +
	`{"role":"user","content":"Name a colour."},` +
	`{"role":"assistant","content":"Blue."},` +
	`{"role":"user","content":"Another one?"}],` +
	`"max_tokens":77,"temperature":0.25,"stop":["END"],` +
	`"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],` +
	`"stream":true,"stream_options":{"include_usage":true}}`

// ClientBodyNoStop is ClientBody without its stop sequences: the body sent
// to an upstream that has none (Cannot has StopSequences).
var ClientBodyNoStop = strings.Replace(ClientBody, `"stop":["END"],`, "", 1)

// request is a fresh copy of the suite's request to up, its body in three
// pieces as the router hands a body over (Parts).
func request(up Upstream) *llm.UpstreamRequest {
	body := ClientBody
	if up.noStop {
		body = ClientBodyNoStop
	}
	third := len(body) / 3
	return &llm.UpstreamRequest{Model: RouteModel, Parts: [][]byte{
		[]byte(body[:third]), []byte(body[third : 2*third]), []byte(body[2*third:]),
	}}
}

// Bounds of the waits the suite checks. They are generous, for a loaded
// machine under -race; an adapter that waits for the network where it must
// not waits until the upstream's end instead, minutes.
const (
	// prompt bounds the return of a call whose context ended or whose
	// stream was closed.
	prompt = 3 * time.Second
	// settle is how long the suite waits before it acts on a call it
	// expects to block.
	settle = 50 * time.Millisecond
	// patience bounds a Next that should return at once, and the wait for
	// goroutines to end.
	patience = 10 * time.Second
)

// result is what one Next returned.
type result struct {
	c   llm.Chunk
	err error
}

// nextWithin calls s.Next and waits at most d for it. ok is false when it
// did not return in time; the call then goes on in the background, and
// closing s must end it.
func nextWithin(s llm.ChunkStream, d time.Duration) (result, bool) {
	return within(startNext(s), d)
}

// next is the stream's next chunk, failing the test when Next does not
// return within patience.
func next(t *testing.T, s llm.ChunkStream) (llm.Chunk, error) {
	t.Helper()
	r, ok := nextWithin(s, patience)
	if !ok {
		t.Fatalf("Next did not return within %v", patience)
	}
	return r.c, r.err
}

// answer is a stream read to its end.
type answer struct {
	chunks []llm.Chunk
	wires  []wireChunk
	end    error
}

// maxChunks bounds a stream the suite reads: its answers are a few chunks.
const maxChunks = 1000

// readAll reads s until Next returns an error, checking each chunk against
// its raw JSON.
func readAll(t *testing.T, s llm.ChunkStream) answer {
	t.Helper()
	var a answer
	for len(a.chunks) < maxChunks {
		c, err := next(t, s)
		if err != nil {
			a.end = err
			return a
		}
		a.chunks = append(a.chunks, c)
		a.wires = append(a.wires, checkChunk(t, len(a.chunks)-1, c))
	}
	t.Fatalf("no end after %d chunks", maxChunks)
	return a
}

// open calls ChatStream and fails the test unless it returned a stream,
// which is closed when the test ends.
func open(t *testing.T, up Upstream, ctx context.Context) llm.ChunkStream {
	t.Helper()
	s, err := up.Provider.ChatStream(ctx, request(up))
	if err != nil {
		t.Fatalf("ChatStream: %v", err)
	}
	if s == nil {
		t.Fatal("ChatStream returned neither a stream nor an error")
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// providerError is err as a *llm.ProviderError, failing the test when it is
// not one.
func providerError(t *testing.T, err error) *llm.ProviderError {
	t.Helper()
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a *llm.ProviderError", err, err)
	}
	return pe
}

// checkClass fails the test unless err is a *llm.ProviderError of class.
func checkClass(t *testing.T, err error, class llm.FailureClass) *llm.ProviderError {
	t.Helper()
	pe := providerError(t, err)
	if pe.Class != class {
		t.Errorf("class %v (%v), want %v", pe.Class, pe, class)
	}
	return pe
}

// checkContextError fails the test unless err is the context's error want,
// wrapped or not, and not a *llm.ProviderError: the router tells the end of
// the request from a provider failure by that.
func checkContextError(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("error %v (%T), want one wrapping %v", err, err, want)
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		t.Errorf("error %v is a *llm.ProviderError: the router would count the caller's own end against the provider", err)
	}
}

// checkEnd fails the test unless the stream ended with want (errors.Is),
// and a later Next ends the same way.
func checkEnd(t *testing.T, s llm.ChunkStream, a answer, want error) {
	t.Helper()
	if !errors.Is(a.end, want) {
		t.Fatalf("stream ended with %v (%T) after %d chunks, want %v", a.end, a.end, len(a.chunks), want)
	}
	if c, err := next(t, s); !errors.Is(err, want) {
		t.Errorf("Next after the end: chunk %q, error %v, want %v again", c.Raw, err, want)
	}
}

// checkReady fails the test when s claims a buffered chunk (Ready)
// where there is none.
func checkReady(t *testing.T, s llm.ChunkStream, when string) {
	t.Helper()
	if s.Ready() {
		t.Errorf("Ready is true %s: Next would wait for the network", when)
	}
}

// checkClose closes s twice: both calls return, and the same error.
func checkClose(t *testing.T, s llm.ChunkStream, wantNil bool) {
	t.Helper()
	first := s.Close()
	second := s.Close()
	if wantNil && first != nil {
		t.Errorf("Close: %v, want nil", first)
	}
	if !errors.Is(second, first) && !(first == nil && second == nil) {
		t.Errorf("Close again: %v, want %v, as the first time", second, first)
	}
}

// checkCalls fails the test unless the upstream received want calls.
func checkCalls(w *world, up Upstream, want int) {
	w.t.Helper()
	if !w.can(CallCount, "the number of upstream calls") {
		return
	}
	if got := up.Calls(); got != want {
		w.t.Errorf("the upstream received %d calls, want %d: an adapter makes one attempt per ChatStream", got, want)
	}
}

// waitCall waits until the upstream received a call, or, when calls cannot
// be counted, a moment.
func waitCall(w *world, up Upstream) {
	w.t.Helper()
	if _, ok := w.Cannot[CallCount]; ok {
		time.Sleep(settle)
		return
	}
	deadline := time.Now().Add(patience)
	for up.Calls() == 0 {
		if time.Now().After(deadline) {
			w.t.Fatalf("the upstream received no call within %v", patience)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(settle) // the upstream is now waiting, and the adapter too
}

// findLeaks waits up to patience for the goroutines that opts do not ignore
// to end, and returns goleak's report of those left.
func findLeaks(opts ...goleak.Option) error {
	deadline := time.Now().Add(patience)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkNoLeaks makes the test fail if, once everything it started is
// stopped (its cleanups), a goroutine it started is left.
func checkNoLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := findLeaks(before); err != nil {
			t.Errorf("goroutines left behind: %v", err)
		}
	})
}

// checkClosed fails the test unless every goroutine started since before
// ended while the upstream still runs: the adapter closed the call's
// connection, and the upstream saw it go.
func checkClosed(t *testing.T, before goleak.Option) {
	t.Helper()
	if err := findLeaks(before); err != nil {
		t.Errorf("the call's connection is still open: %v", err)
	}
}

// wireChunk is what the suite reads of a chunk's JSON: the chunk as the
// gateway reads an upstream's, and its object.
type wireChunk struct {
	chat.UpstreamChunk
	Object string `json:"object"`
}

// rawString is a raw JSON value's string, or "" when it is not one (as
// the gateway reads a reasoning field).
func rawString(r json.RawMessage) string {
	var s string
	if json.Unmarshal(r, &s) != nil {
		return ""
	}
	return s
}

// output reports whether the chunk carries output: text, a refusal,
// reasoning or a tool call.
func (w *wireChunk) output() bool {
	nonEmpty := func(s *string) bool { return s != nil && *s != "" }
	for _, c := range w.Choices {
		d := c.Delta
		if nonEmpty(d.Content) || nonEmpty(d.Refusal) || rawString(d.ReasoningContent) != "" || rawString(d.Reasoning) != "" ||
			len(d.ToolCalls) > 0 || d.FunctionCall != nil {
			return true
		}
	}
	return false
}

// choices is the bits of the chunk's choices, and of those that finished
// (llm.Chunk's Seen and Finished), and the text they add (llm.Chunk's
// Text).
func (w *wireChunk) choices() (seen, finished uint64, text string) {
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	for _, c := range w.Choices {
		bit := uint64(1) << min(max(c.Index, 0), 63)
		seen |= bit
		if c.FinishReason != nil && *c.FinishReason != "" {
			finished |= bit
		}
		d := c.Delta
		text += str(d.Content) + str(d.Refusal) + rawString(d.ReasoningContent) + rawString(d.Reasoning)
		for _, tc := range d.ToolCalls {
			text += tc.Function.Name + tc.Function.Arguments
		}
	}
	return seen, finished, text
}

// finish is the chunk's first non-empty finish_reason.
func (w *wireChunk) finish() string {
	for _, c := range w.Choices {
		if c.FinishReason != nil && *c.FinishReason != "" {
			return *c.FinishReason
		}
	}
	return ""
}

// usage is the chunk's usage object, or nil.
func (w *wireChunk) usage() json.RawMessage {
	if len(w.Usage) == 0 || string(w.Usage) == "null" {
		return nil
	}
	return w.Usage
}

// checkChunk checks that chunk i is a chat.completion.chunk whose fields
// say what its JSON says, and returns the JSON read.
func checkChunk(t *testing.T, i int, c llm.Chunk) wireChunk {
	t.Helper()
	var w wireChunk
	if err := json.Unmarshal(c.Raw, &w); err != nil {
		t.Fatalf("chunk %d: Raw %q is not a chunk: %v", i, c.Raw, err)
	}
	if w.Object != chat.ObjectChunk {
		t.Errorf("chunk %d: object %q, want chat.completion.chunk", i, w.Object)
	}
	if w.ID == "" || c.ID != w.ID {
		t.Errorf("chunk %d: ID %q, raw id %q: want the same, not empty", i, c.ID, w.ID)
	}
	if got, want := c.Output, w.output(); got != want {
		t.Errorf("chunk %d %s: Output %v, want %v", i, c.Raw, got, want)
	}
	if got, want := c.FinishReason, w.finish(); got != want {
		t.Errorf("chunk %d %s: FinishReason %q, want %q", i, c.Raw, got, want)
	}
	if c.Model != w.Model || c.Created != w.Created {
		t.Errorf("chunk %d %s: Model %q, Created %d: want the raw chunk's", i, c.Raw, c.Model, c.Created)
	}
	// The router reads these: a choice's finish ends the answer only once
	// every choice seen finished, and the text is what is counted and
	// billed when no usage comes.
	if seen, finished, text := w.choices(); c.Seen != seen || c.Finished != finished || c.Text != text {
		t.Errorf("chunk %d %s: Seen %b, Finished %b, Text %q, want %b, %b, %q", i, c.Raw, c.Seen, c.Finished, c.Text, seen, finished, text)
	}
	if got, want := c.HasChoices, len(w.Choices) > 0; got != want {
		t.Errorf("chunk %d %s: HasChoices %v, want %v", i, c.Raw, got, want)
	}
	if got, want := c.Usage, w.usage(); !sameUsage(got, want) {
		t.Errorf("chunk %d: Usage %+v, want %s", i, got, want)
	}
	return w
}

// sameUsage reports whether got is the usage object raw reads as, or both
// are absent.
func sameUsage(got *llm.Usage, raw json.RawMessage) bool {
	if got == nil || raw == nil {
		return got == nil && raw == nil
	}
	want, err := llm.ParseUsage(raw)
	if err != nil {
		return false
	}
	ja, errA := json.Marshal(got)
	jb, errB := json.Marshal(want)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// texts is the answer's non-empty content pieces, in order.
func (a answer) texts() []string {
	var out []string
	for _, w := range a.wires {
		for _, c := range w.Choices {
			if c.Delta.Content != nil && *c.Delta.Content != "" {
				out = append(out, *c.Delta.Content)
			}
		}
	}
	return out
}

// outputs is the number of chunks with output.
func (a answer) outputs() int {
	n := 0
	for _, c := range a.chunks {
		if c.Output {
			n++
		}
	}
	return n
}

// checkAnswer checks a complete answer against its script: the pieces or
// the tool call, one chunk id, one finish after the last output, and the
// usage as reported (in a usage chunk, or, when the stream ended without
// its end marker, by UsageSoFar).
func checkAnswer(w *world, s Script, a answer, st llm.ChunkStream) {
	t := w.t
	t.Helper()
	checkIDs(t, a)
	if s.ToolCall != nil {
		checkToolCall(t, *s.ToolCall, a)
		if got := a.texts(); len(got) > 0 {
			t.Errorf("text %q besides the tool call", got)
		}
	} else {
		checkTexts(w, s.Text, a, s.JSON)
	}

	var finishes []int
	lastOutput := -1
	for i, c := range a.chunks {
		if c.FinishReason != "" {
			finishes = append(finishes, i)
		}
		if c.Output {
			lastOutput = i
		}
	}
	if len(finishes) != 1 {
		t.Errorf("%d chunks with a finish_reason, want 1", len(finishes))
	} else {
		if got, want := a.chunks[finishes[0]].FinishReason, s.Finish.ChatCompletions(); got != want {
			t.Errorf("finish_reason %q, want %q", got, want)
		}
		if lastOutput > finishes[0] {
			t.Errorf("output in chunk %d after the finish_reason in chunk %d", lastOutput, finishes[0])
		}
	}

	var usages []*llm.Usage
	for _, c := range a.chunks {
		if c.Usage != nil {
			usages = append(usages, c.Usage)
		}
	}
	if s.Usage == nil {
		if len(usages) > 0 {
			t.Errorf("usage %+v from an upstream that reported none", *usages[0])
		}
		if so := st.Report().Usage; so != nil {
			t.Errorf("UsageSoFar %+v from an upstream that reported none", so)
		}
		return
	}
	if len(usages) == 0 && !errors.Is(a.end, io.EOF) {
		// A stream that ended before its end marker may not have sent its
		// usage chunk yet; what its upstream reported is then UsageSoFar,
		// which the router bills on.
		if so := st.Report().Usage; so != nil {
			usages = append(usages, so)
		}
	}
	if len(usages) != 1 {
		t.Fatalf("%d chunks with usage, want 1", len(usages))
	}
	u := *usages[0]
	if u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %+v: total_tokens is not the sum", u)
	}
	// At the end, what was reported so far is what was reported.
	if so := st.Report().Usage; so != nil {
		if so.PromptTokens != u.PromptTokens || so.CompletionTokens != u.CompletionTokens {
			t.Errorf("UsageSoFar %+v at the end, want the counts of usage %+v", *so, u)
		}
	}
	if w.can(ScriptedUsage, "the token counts") {
		if u.PromptTokens != s.Usage.Prompt || u.CompletionTokens != s.Usage.Completion {
			t.Errorf("usage %+v, want prompt_tokens %d and completion_tokens %d", u, s.Usage.Prompt, s.Usage.Completion)
		}
	} else if u.PromptTokens <= 0 || u.CompletionTokens <= 0 {
		t.Errorf("usage %+v: want some prompt and completion tokens", u)
	}
}

// checkPartial checks the chunks of an answer stopped after `after` pieces:
// those pieces, and no finish.
func checkPartial(w *world, s Script, a answer, after int) {
	t := w.t
	t.Helper()
	checkIDs(t, a)
	checkTexts(w, s.Text[:after], a, false)
	for i, c := range a.chunks {
		if c.FinishReason != "" {
			t.Errorf("chunk %d: finish_reason %q in an answer that did not finish", i, c.FinishReason)
		}
	}
}

// checkTexts checks the answer's content pieces; joined compares their
// concatenation only (a JSON answer has its text in one piece).
func checkTexts(w *world, want []string, a answer, joined bool) {
	t := w.t
	t.Helper()
	got := a.texts()
	if a.outputs() != len(got) {
		t.Errorf("%d chunks with output, %d text pieces %q: want one piece a chunk", a.outputs(), len(got), got)
	}
	if joined {
		if g, wj := strings.Join(got, ""), strings.Join(want, ""); g != wj {
			t.Errorf("text %q, want %q", g, wj)
		}
		return
	}
	if !w.can(ScriptedText, "the text of the pieces") {
		if len(got) != len(want) {
			t.Errorf("%d text pieces %q, want %d", len(got), got, len(want))
		}
		return
	}
	if !cmp.Equal(got, want, cmpopts.EquateEmpty()) {
		t.Errorf("text pieces %q, want %q, in order", got, want)
	}
}

// checkIDs fails the test unless the chunks share one id.
func checkIDs(t *testing.T, a answer) {
	t.Helper()
	for i, c := range a.chunks {
		if c.ID != a.chunks[0].ID {
			t.Errorf("chunk %d: id %q, want the stream's %q", i, c.ID, a.chunks[0].ID)
		}
	}
}

// checkToolCall checks that the chunks' tool-call deltas add up to one
// call, want.
func checkToolCall(t *testing.T, want ToolCall, a answer) {
	t.Helper()
	type call struct{ ID, Type, Name, Arguments string }
	calls := map[int]*call{}
	for _, w := range a.wires {
		for _, ch := range w.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				c := calls[tc.Index]
				if c == nil {
					c = &call{}
					calls[tc.Index] = c
				}
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Type != "" {
					c.Type = tc.Type
				}
				c.Name += tc.Function.Name
				c.Arguments += tc.Function.Arguments
			}
		}
	}
	wantCalls := map[int]*call{0: {ID: want.ID, Type: "function", Name: want.Name, Arguments: want.Arguments}}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}
