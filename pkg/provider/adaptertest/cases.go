package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

type testCase struct {
	name  string
	needs []Feature
	run   func(w *world)
}

var cases = append([]testCase{
	{"Text", nil, answerCase(answered(text...), io.EOF)},
	{"EmptyAnswer", []Feature{ScriptedText, EmptyAnswer}, answerCase(answered(), io.EOF)},
	{"ToolCall", []Feature{ToolCalls}, answerCase(Script{
		ToolCall: &ToolCall{ID: "call_contract_1", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`},
		Finish:   FinishToolCalls,
		Usage:    &Usage{Prompt: 40, Completion: 12},
	}, io.EOF)},
	{"FinishReasons", []Feature{FinishReasons}, testFinishReasons},
	{"NoUsage", []Feature{OmittedUsage}, answerCase(Script{Text: text}, io.EOF)},
	{"UsageSoFar", []Feature{EarlyUsage}, testUsageSoFar},
	// An upstream that ignores "stream": true and answers with one JSON
	// body is read as the stream it would have sent.
	{"JSONAnswer", []Feature{JSONAnswer}, answerCase(with(answered(text...), func(s *Script) { s.JSON = true }), io.EOF)},
	{"Request", []Feature{ObservedRequest}, testRequest},
	// A stop sequence an upstream cannot honour is refused, not dropped:
	// it would change the answer.
	{"StopRefused", nil, testStopRefused},
	{"Concurrent", nil, testConcurrent},
	{"ConnectionRefused", []Feature{ConnectionFailure}, connectionFailure(func(s *Script) { s.Refused = true }, 0)},
	{"ConnectionReset", []Feature{ConnectionFailure}, connectionFailure(func(s *Script) { s.Reset = true }, 1)},
	{"CutBeforeOutput", []Feature{Cuts}, cutCase(0, CutClose, llm.ErrStreamCut)},
	{"CutAfterOutput", []Feature{Cuts}, cutCase(1, CutClose, llm.ErrStreamCut)},
	{"AbortAfterOutput", []Feature{Cuts}, cutCase(1, CutAbort, llm.ErrStreamCut)},
	{"ResetAfterOutput", []Feature{Cuts}, cutCase(1, CutReset, nil)},
	// A complete answer whose stream ends without its end marker ends with
	// llm.ErrStreamCut (the router, having seen the finish, takes it as
	// whole).
	{"NoEndMarker", []Feature{Cuts, EndMarker}, answerCase(with(answered(text...), func(s *Script) { s.NoEnd = true }), llm.ErrStreamCut)},
	{"ErrorEventBeforeOutput", []Feature{ErrorEvents}, cutCase(0, CutError, nil)},
	{"ErrorEventAfterOutput", []Feature{ErrorEvents}, cutCase(2, CutError, nil)},
	{"MalformedFirstEvent", []Feature{MalformedEvents}, cutCase(0, CutMalformed, nil)},
	{"MalformedEventAfterOutput", []Feature{MalformedEvents}, cutCase(2, CutMalformed, nil)},
	{"MalformedJSONAnswer", []Feature{JSONAnswer, MalformedEvents}, testMalformedJSON},
	{"CanceledBeforeCall", nil, testCanceledBeforeCall},
	{"CancelWaitingForHead", nil, waitingForHead(false)},
	{"DeadlineWaitingForHead", nil, waitingForHead(true)},
	{"CancelWaitingForFirstChunk", nil, stallCase(0, false, false)},
	{"CancelMidStream", nil, stallCase(1, false, false)},
	{"CloseUnblocksNext", nil, stallCase(1, true, false)},
	// An event that carries no chunk is not one Ready may announce.
	{"KeepAliveThenStall", []Feature{KeepAlives}, stallCase(1, false, true)},
	{"CloseBeforeRead", nil, testCloseBeforeRead},
}, statusCases()...)

// text is the answer of most cases.
var text = []string{"Hello", ",", " world", "!"}

// answered is a script of a complete answer of pieces.
func answered(pieces ...string) Script {
	if pieces == nil {
		pieces = []string{}
	}
	return Script{Text: pieces, Usage: &Usage{Prompt: 11, Completion: len(pieces)}}
}

// with is s changed by f.
func with(s Script, f func(*Script)) Script {
	f(&s)
	return s
}

// answerCase: the answer s scripts arrives whole (its pieces in order, each
// with Output, one finish after them, its usage), and the stream ends with
// end, then again on every later Next.
func answerCase(s Script, end error) func(w *world) {
	return func(w *world) {
		t := w.t
		up := w.start(s)
		st := open(t, up, t.Context())
		a := readAll(t, st)
		checkEnd(t, st, a, end)
		checkAnswer(w, s, a, st)
		checkReady(t, st, "after the end")
		checkClose(t, st, end == io.EOF)
		checkCalls(w, up, 1)
	}
}

// testFinishReasons: each way an answer ends reaches the client as Chat
// Completions' finish_reason.
func testFinishReasons(w *world) {
	for _, f := range []Finish{FinishLength, FinishContentFilter, FinishStopSequence} {
		w.t.Run(strings.ReplaceAll(string(f), " ", "_"), func(t *testing.T) {
			answerCase(with(answered("Hi", " there"), func(s *Script) { s.Finish = f }), io.EOF)(&world{Adapter: w.Adapter, t: t})
		})
	}
}

// testUsageSoFar: a stream that stalls after its first output reports the
// prompt's tokens the upstream reported at its start.
func testUsageSoFar(w *world) {
	t := w.t
	s := answered(text...)
	s.Cut, s.CutAfter = CutStall, 1
	up := w.start(s)
	st := open(t, up, t.Context())
	readUntilBlocked(t, st, 1)
	u := st.Report().Usage
	if u == nil {
		t.Fatal("UsageSoFar is nil after the upstream reported the prompt's tokens")
	}
	if w.can(ScriptedUsage, "UsageSoFar's prompt tokens") {
		if u.PromptTokens != s.Usage.Prompt {
			t.Errorf("UsageSoFar %+v: prompt_tokens %d, want %d", *u, u.PromptTokens, s.Usage.Prompt)
		}
	} else if u.PromptTokens <= 0 {
		t.Errorf("UsageSoFar %+v: no prompt tokens", *u)
	}
	checkClose(t, st, false)
	checkCalls(w, up, 1)
}

// testRequest: the upstream receives the route's model and the client's
// fields, in its protocol.
func testRequest(w *world) {
	t := w.t
	up := w.start(answered(text...))
	st := open(t, up, t.Context())
	checkEnd(t, st, readAll(t, st), io.EOF)
	st.Close()
	got := up.Received()
	if len(got) != 1 {
		t.Fatalf("the upstream received %d requests, want 1", len(got))
	}
	r := got[0]
	if w.can(PassThrough, "the body byte for byte") && string(r.Body) != string(request(up).Bytes()) {
		t.Errorf("the upstream received the body\n%s\nwant it as the client sent it:\n%s", r.Body, request(up).Bytes())
	}
	temperature := 0.25
	want := Received{
		Model:  RouteModel,
		Stream: true,
		System: "Answer in one word.",
		Messages: []Message{
			{Role: "user", Text: "Name a colour."},
			{Role: "assistant", Text: "Blue."},
			{Role: "user", Text: "Another one?"},
		},
		MaxTokens:   77,
		Temperature: &temperature,
		Stop:        []string{"END"},
		Tools:       []string{"get_weather"},
	}
	if up.noStop {
		want.Stop = nil
	}
	r.Body = nil
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("the request the upstream received (-want +got):\n%s", diff)
	}
}

// testStopRefused: an adapter whose upstream has no stop sequences refuses
// a request with one as the upstream's own 400 would (FailRejected, with a
// message), without calling it.
func testStopRefused(w *world) {
	t := w.t
	if _, ok := w.Cannot[StopSequences]; !ok {
		t.Skip("the upstream takes stop sequences")
	}
	up := w.start(answered(text...))
	s, err := up.Provider.ChatStream(t.Context(), &llm.UpstreamRequest{Model: RouteModel, Body: []byte(ClientBody)})
	if s != nil {
		s.Close()
		t.Fatalf("ChatStream returned a stream (and error %v) for a request with a stop sequence", err)
	}
	if pe := checkClass(t, err, llm.FailRejected); pe.Message == "" {
		t.Error("the refusal has no message")
	}
	checkCalls(w, up, 0)
}

// testConcurrent: calls made at once each get their own answer, in one
// upstream call each.
func testConcurrent(w *world) {
	t := w.t
	const n = 4
	s := answered(text...)
	up := w.start(s)
	type outcome struct {
		texts []string
		err   error
	}
	done := make(chan outcome, n)
	for range n {
		go func() {
			st, err := up.Provider.ChatStream(t.Context(), request(up))
			if err != nil {
				done <- outcome{err: err}
				return
			}
			defer st.Close()
			var o outcome
			for {
				c, err := st.Next()
				if err != nil {
					if err != io.EOF {
						o.err = err
					}
					done <- o
					return
				}
				var wc wireChunk
				if err := json.Unmarshal(c.Raw, &wc); err != nil {
					done <- outcome{err: err}
					return
				}
				o.texts = append(o.texts, answer{wires: []wireChunk{wc}}.texts()...)
			}
		}()
	}
	scripted := w.can(ScriptedText, "the text of the concurrent answers")
	for i := range n {
		o := <-done
		switch {
		case o.err != nil:
			t.Errorf("call %d: %v", i, o.err)
		case len(o.texts) != len(s.Text):
			t.Errorf("call %d: %d text pieces %q, want %d", i, len(o.texts), o.texts, len(s.Text))
		case scripted && !cmp.Equal(o.texts, s.Text):
			t.Errorf("call %d: text pieces %q, want %q", i, o.texts, s.Text)
		}
	}
	checkCalls(w, up, n)
}

// statuses are the statuses the suite answers with, and the class of each:
// a redirect is not followed (it would be a second call), a 401, 403 or
// 404 (about the route's model, Script.Missing's default) is the
// provider's configuration (its key, the route's model) and not the
// client's problem.
var statuses = []struct {
	code  int
	class llm.FailureClass
}{
	{307, llm.FailTransient},
	{308, llm.FailTransient},
	{400, llm.FailRejected},
	{401, llm.FailConfig},
	{403, llm.FailConfig},
	{404, llm.FailConfig},
	{429, llm.FailThrottled},
	{500, llm.FailTransient},
	{502, llm.FailTransient},
	{503, llm.FailTransient},
	{529, llm.FailTransient},
}

// StatusCodes returns the statuses the suite scripts, each a feature
// (Status) a world may lack.
func StatusCodes() []int {
	codes := make([]int, len(statuses))
	for i, sc := range statuses {
		codes[i] = sc.code
	}
	return codes
}

// statusCases: a status other than 200 fails the call before any stream,
// classified as the router acts on it.
func statusCases() []testCase {
	var out []testCase
	for _, sc := range statuses {
		out = append(out, testCase{fmt.Sprintf("Status%d", sc.code), []Feature{Status(sc.code)}, func(w *world) {
			testStatus(w, sc.code, sc.class)
		}})
	}
	out = append(out, testCase{"Status404Reference", []Feature{Status(404)}, testMissingReference})
	return out
}

// testMissingReference: a 404 about an object the request named (a file,
// a conversation) is the client's: rejected, with the upstream's message,
// so that the router passes it on and leaves the route in.
func testMissingReference(w *world) {
	t := w.t
	s := answered(text...)
	s.Status, s.Missing = 404, MissingReference
	up := w.start(s)
	pe := checkClass(t, refusedCall(t, up), llm.FailRejected)
	if pe.Status != 404 || !strings.Contains(pe.Message, "not found") {
		t.Errorf("%v: want status 404 and the upstream's message", pe)
	}
}

func testStatus(w *world, code int, class llm.FailureClass) {
	t := w.t
	s := answered(text...)
	s.Status = code
	s.ErrorMessage = "contract: max_tokens is out of range"
	if code == 429 {
		s.RetryAfter = 2 * time.Second
	}
	up := w.start(s)
	pe := checkClass(t, refusedCall(t, up), class)
	if pe.Status != code {
		t.Errorf("Status %d (%v), want %d", pe.Status, pe, code)
	}
	switch code {
	case 400:
		// The router passes a 400's message to the client as the reason.
		if w.can(ErrorMessage, "the message of a 400") {
			if pe.Message != s.ErrorMessage {
				t.Errorf("Message %q, want the upstream's %q", pe.Message, s.ErrorMessage)
			}
		} else if pe.Message == "" {
			t.Error("a 400 without a message")
		}
	case 429:
		if w.can(RetryAfterHint, "the retry hint of a 429") && pe.RetryAfter != s.RetryAfter {
			t.Errorf("RetryAfter %v, want the upstream's %v", pe.RetryAfter, s.RetryAfter)
		}
	}
	checkCalls(w, up, 1)
}

// refusedCall makes a call that must fail before its stream.
func refusedCall(t *testing.T, up Upstream) error {
	t.Helper()
	s, err := up.Provider.ChatStream(t.Context(), request(up))
	if s != nil {
		s.Close()
		t.Fatalf("ChatStream returned a stream (and error %v), want only an error", err)
	}
	if err == nil {
		t.Fatal("ChatStream returned neither a stream nor an error")
	}
	return err
}

// connectionFailure: no answer at all (nothing listens, or the connection
// is reset once the request is read) is a transient failure without a
// status. calls is the number of calls the upstream receives.
func connectionFailure(f func(*Script), calls int) func(w *world) {
	return func(w *world) {
		t := w.t
		up := w.start(with(answered(text...), f))
		pe := checkClass(t, refusedCall(t, up), llm.FailTransient)
		if pe.Status != 0 {
			t.Errorf("Status %d, want 0: no answer was received", pe.Status)
		}
		if calls > 0 {
			checkCalls(w, up, calls)
		}
	}
}

// cutCase: an answer that stops after `after` pieces gives those pieces,
// no finish, and then ends with want (errors.Is), or, when want is nil,
// with a transient *llm.ProviderError.
func cutCase(after int, how CutMode, want error) func(w *world) {
	return func(w *world) {
		t := w.t
		s := answered(text...)
		s.Cut, s.CutAfter = how, after
		up := w.start(s)
		st := open(t, up, t.Context())
		a := readAll(t, st)
		checkPartial(w, s, a, after)
		if want != nil {
			checkEnd(t, st, a, want)
		} else {
			checkFailed(t, st, a)
		}
		checkClose(t, st, false)
		checkCalls(w, up, 1)
	}
}

// testMalformedJSON: a JSON answer that is not JSON is a transient failure,
// of ChatStream or of the stream.
func testMalformedJSON(w *world) {
	t := w.t
	s := answered(text...)
	s.JSON = true
	s.Cut = CutMalformed
	up := w.start(s)
	st, err := up.Provider.ChatStream(t.Context(), request(up))
	if err != nil {
		checkClass(t, err, llm.FailTransient)
	} else {
		t.Cleanup(func() { st.Close() })
		a := readAll(t, st)
		checkPartial(w, s, a, 0)
		checkFailed(t, st, a)
		checkClose(t, st, false)
	}
	checkCalls(w, up, 1)
}

// checkFailed fails the test unless the stream ended with a transient
// *llm.ProviderError with a message, and Next fails again after it.
func checkFailed(t *testing.T, st llm.ChunkStream, a answer) {
	t.Helper()
	pe := checkClass(t, a.end, llm.FailTransient)
	if pe.Message == "" {
		t.Errorf("failure %v has no message", pe)
	}
	if c, err := next(t, st); err == nil {
		t.Errorf("Next after the failure returned chunk %s", c.Raw)
	}
}

func testCanceledBeforeCall(w *world) {
	t := w.t
	up := w.start(answered(text...))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s, err := up.Provider.ChatStream(ctx, request(up))
	if s != nil {
		s.Close()
		t.Fatal("ChatStream with a done context returned a stream")
	}
	checkContextError(t, err, context.Canceled)
	time.Sleep(settle)
	checkCalls(w, up, 0)
}

// waitingForHead: the caller's context ending (cancelled, or, with
// deadline, at its deadline) while the upstream has not answered ends
// ChatStream at once, and its connection.
func waitingForHead(deadline bool) func(w *world) {
	return func(w *world) {
		t := w.t
		up := w.start(with(answered(text...), func(s *Script) { s.Hang = true }))
		ctx, cancel := context.WithCancel(t.Context())
		want := context.Canceled
		if deadline {
			ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
			want = context.DeadlineExceeded
		}
		defer cancel()
		before := goleak.IgnoreCurrent()
		done := make(chan error, 1)
		go func() {
			s, err := up.Provider.ChatStream(ctx, request(up))
			if s != nil {
				s.Close()
				err = errors.New("ChatStream returned a stream from an upstream that never answered")
			}
			done <- err
		}()
		waitCall(w, up)
		if !deadline {
			cancel()
		}
		<-ctx.Done()
		select {
		case err := <-done:
			checkContextError(t, err, want)
		case <-time.After(prompt):
			t.Fatalf("ChatStream did not return within %v of its context's end", prompt)
		}
		checkClosed(t, before)
		checkCalls(w, up, 1)
	}
}

// stallCase: a stream whose upstream stalls after `after` pieces (and,
// with keepAlive, an event that carries no chunk) gives them, then waits;
// the caller's context ending (or, with byClose, Close) ends the wait at
// once with an error that is not the provider's, and the connection.
func stallCase(after int, byClose, keepAlive bool) func(w *world) {
	return func(w *world) {
		t := w.t
		s := answered(text...)
		s.Cut, s.CutAfter, s.KeepAlive = CutStall, after, keepAlive
		up := w.start(s)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		before := goleak.IgnoreCurrent()
		st := open(t, up, ctx)
		a, pending := readUntilBlocked(t, st, after)
		checkPartial(w, s, a, after)
		if byClose {
			if err := st.Close(); err != nil {
				t.Logf("Close: %v", err)
			}
		} else {
			cancel()
		}
		r, ok := within(pending, prompt)
		// A chunk without output that was slow to arrive (on a loaded
		// machine) may still come first; output may not.
		for ok && r.err == nil && !r.c.Output {
			r, ok = within(startNext(st), prompt)
		}
		if !ok {
			t.Fatalf("Next did not return within %v of the %s", prompt, map[bool]string{true: "stream's Close", false: "context's end"}[byClose])
		}
		switch {
		case r.err == nil:
			t.Errorf("Next returned chunk %s from a stalled upstream", r.c.Raw)
		case byClose:
			if r.err == io.EOF {
				t.Error("Next after Close returned io.EOF: a closed stream is not a complete answer")
			}
			var pe *llm.ProviderError
			if errors.As(r.err, &pe) {
				t.Errorf("Next after Close returned %v: the caller's Close is not the provider's failure", r.err)
			}
		default:
			checkContextError(t, r.err, context.Canceled)
		}
		st.Close()
		checkClosed(t, before)
		checkClose(t, st, false)
		checkCalls(w, up, 1)
	}
}

// blockedAfter is how long a Next that has not returned is taken to wait
// for the network.
const blockedAfter = 500 * time.Millisecond

// readUntilBlocked reads the stream's first `outputs` output chunks and the
// chunks without output that follow them, up to the Next that waits for the
// network, whose result comes on pending. A stream that says it is Ready
// must not wait.
func readUntilBlocked(t *testing.T, st llm.ChunkStream, outputs int) (a answer, pending <-chan result) {
	t.Helper()
	for len(a.chunks) < maxChunks {
		ready := st.Ready()
		ch := startNext(st)
		wait := patience
		if a.outputs() >= outputs {
			wait = blockedAfter
		}
		r, ok := within(ch, wait)
		if !ok {
			if a.outputs() < outputs {
				t.Fatalf("Next did not return within %v, after %d of the %d output chunks sent", wait, a.outputs(), outputs)
			}
			if ready {
				t.Error("Ready was true, and then Next waited for the network")
			}
			return a, ch
		}
		if r.err != nil {
			t.Fatalf("Next after %d chunks: %v, want it to wait for the stalled upstream", len(a.chunks), r.err)
		}
		a.chunks = append(a.chunks, r.c)
		a.wires = append(a.wires, checkChunk(t, len(a.chunks)-1, r.c))
	}
	t.Fatalf("no stall after %d chunks", maxChunks)
	return a, nil
}

func startNext(st llm.ChunkStream) <-chan result {
	ch := make(chan result, 1)
	go func() {
		c, err := st.Next()
		ch <- result{c, err}
	}()
	return ch
}

func within(ch <-chan result, d time.Duration) (result, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, true
	case <-t.C:
		return result{}, false
	}
}

// testCloseBeforeRead: a stream closed before it is read closes again, and
// gives no chunk.
func testCloseBeforeRead(w *world) {
	t := w.t
	up := w.start(answered(text...))
	st := open(t, up, t.Context())
	checkClose(t, st, false)
	if c, err := next(t, st); err == nil {
		t.Errorf("Next after Close returned chunk %s", c.Raw)
	} else if err == io.EOF {
		t.Error("Next after Close returned io.EOF: a closed stream is not a complete answer")
	}
	checkCalls(w, up, 1)
}
