package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// scripted is a Transport whose answer is events, then end (io.EOF when
// nil), or, when fail is set, no answer but fail.
type scripted struct {
	events []upstream.Event
	end    error
	fail   error

	call     upstream.Call
	released bool
	closed   int
}

func (t *scripted) Open(_ context.Context, call upstream.Call) (upstream.Events, error) {
	t.call = call
	if t.fail != nil {
		return nil, t.fail
	}
	return t, nil
}

func (t *scripted) Next() (upstream.Event, error) {
	if len(t.events) == 0 {
		if t.end == nil {
			return upstream.Event{}, io.EOF
		}
		return upstream.Event{}, t.end
	}
	ev := t.events[0]
	t.events = t.events[1:]
	return ev, nil
}

func (t *scripted) Release()     { t.released = true }
func (t *scripted) Close() error { t.closed++; return nil }

var scriptedStream = []upstream.Event{
	{Name: "message_start", Data: []byte(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`)},
	{Name: "content_block_start", Data: []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
	{Name: "content_block_delta", Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`)},
	{Name: "content_block_stop", Data: []byte(`{"type":"content_block_stop","index":0}`)},
	{Name: "message_delta", Data: []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`)},
	{Name: "message_stop", Data: []byte(`{"type":"message_stop"}`)},
}

const scriptedWhole = `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`

// TestOverTransport: a Client reads its answers from its Transport's
// events, passed through (a Messages request) or translated, streamed or
// whole; the call carries the body and, passed through, the client's
// headers; an answer's end before message_stop is a cut, a failure is
// returned as the transport gave it.
func TestOverTransport(t *testing.T) {
	native := func() *llm.UpstreamRequest {
		return &llm.UpstreamRequest{Model: "claude-x", Proto: llm.ProtoMessages, Parts: [][]byte{[]byte(`{"model":"claude-x",`), []byte(`"max_tokens":5,"messages":[]}`)},
			Header: http.Header{"Anthropic-Beta": {"b1"}}}
	}
	names := func(chunks []llm.Chunk) string {
		var n []string
		for _, c := range chunks {
			n = append(n, c.Event)
		}
		return strings.Join(n, " ")
	}
	const all = "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"

	tr := &scripted{events: scriptedStream}
	s, err := NewOver("b", tr).ChatStream(t.Context(), native())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(s)
	if err != io.EOF || names(chunks) != all || !tr.released || tr.closed == 0 {
		t.Errorf("passed through: %q, %v, released %v, closed %d", names(chunks), err, tr.released, tr.closed)
	}
	if tr.call.Model != "claude-x" || len(tr.call.Body) != 2 || tr.call.Header.Get("Anthropic-Beta") != "b1" {
		t.Errorf("call %+v", tr.call)
	}

	tr = &scripted{events: []upstream.Event{{Data: []byte(scriptedWhole), Whole: true}}}
	s, _ = NewOver("b", tr).ChatStream(t.Context(), native())
	chunks, err = collect(s)
	if want := "    "; err != io.EOF || len(chunks) != 5 || names(chunks) != want {
		t.Errorf("whole, passed through: %q, %v", names(chunks), err)
	}
	if got, want := eventTypes(chunks), "message_start content_block_start content_block_stop message_delta message_stop"; got != want {
		t.Errorf("whole, passed through: events %s, want %s", got, want)
	}

	tr = &scripted{events: scriptedStream, end: nil}
	s, _ = NewOver("b", tr).ChatStream(t.Context(), testRequest())
	chunks, err = collect(s)
	var text string
	for _, c := range chunks {
		text += c.Text
	}
	if err != io.EOF || text != "Hi" || tr.call.Header != nil || len(tr.call.Body) != 1 || !strings.Contains(string(tr.call.Body[0]), `"model":"claude-x"`) {
		t.Errorf("translated: text %q, %v, call %+v", text, err, tr.call)
	}

	tr = &scripted{events: scriptedStream[:3]}
	s, _ = NewOver("b", tr).ChatStream(t.Context(), native())
	if _, err = collect(s); err != llm.ErrStreamCut {
		t.Errorf("events ended early: %v, want llm.ErrStreamCut", err)
	}

	broken := &llm.ProviderError{Class: llm.FailTransient, Message: "broken"}
	tr = &scripted{events: scriptedStream[:3], end: broken}
	s, _ = NewOver("b", tr).ChatStream(t.Context(), native())
	if _, err = collect(s); err != broken {
		t.Errorf("events that failed: %v, want %v", err, broken)
	}

	refused := &llm.ProviderError{Class: llm.FailThrottled, Status: 429}
	if s, err := NewOver("b", &scripted{fail: refused}).ChatStream(t.Context(), native()); s != nil || err != refused {
		t.Errorf("a call refused: %v, want %v", err, refused)
	}

	tr = &scripted{events: scriptedStream}
	s, _ = NewOver("b", tr).ChatStream(t.Context(), native())
	s.Close()
	if _, err := s.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	s, _ = NewOver("b", &scripted{events: scriptedStream}).ChatStream(ctx, native())
	cancel()
	if _, err := collect(s); !errors.Is(err, context.Canceled) {
		t.Errorf("a context ended: %v, want context.Canceled", err)
	}
}

// TestNativeWholeAnswer: a Messages request passed through to an upstream
// that answers with a whole Message gets every event that streams it, in
// order.
func TestNativeWholeAnswer(t *testing.T) {
	up := providertest.NewAnthropic(t)
	up.Script(providertest.Response{NonStreaming: true})
	s, err := New("a", up.URL(), "k", nil).ChatStream(t.Context(), &llm.UpstreamRequest{Model: "claude-x", Proto: llm.ProtoMessages,
		Body: []byte(`{"model":"claude-x","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(s)
	want := "message_start content_block_start content_block_stop message_delta message_stop"
	if got := eventTypes(chunks); err != io.EOF || got != want {
		t.Errorf("events %s, %v; want %s", got, err, want)
	}
}

// eventTypes are the chunks' events' types.
func eventTypes(chunks []llm.Chunk) string {
	var types []string
	for _, c := range chunks {
		var ev struct{ Type string }
		_ = json.Unmarshal(c.Raw, &ev)
		types = append(types, ev.Type)
	}
	return strings.Join(types, " ")
}
