package openairesponses

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

const (
	sseCreated    = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"m\"}}\n\n"
	sseInProgress = "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\"}}\n\n"
	ssePartAdded  = "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"output_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n"
	sseDelta      = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hi\"}\n\n"
	sseCompleted  = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[]}}\n\n"
)

// pipeStream is a stream over a pipe: what is written to it is what the
// network has delivered, and a read waits for the next write.
func pipeStream(t *testing.T, conv converter) (*stream, *io.PipeWriter) {
	t.Helper()
	r, w := io.Pipe()
	t.Cleanup(func() { r.Close(); w.Close() })
	s := &stream{conv: conv}
	s.body.Init("openai-responses", context.Background(), &http.Response{Body: r, Header: http.Header{"Content-Type": {"text/event-stream"}}}, ErrClosed)
	return s, w
}

// write delivers s (it returns once s was read, or the pipe closed).
func write(w *io.PipeWriter, s string) { _, _ = io.WriteString(w, s) }

func mustNext(t *testing.T, s *stream) llm.Chunk {
	t.Helper()
	c, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadyTranslated: Ready is true only when Next will not wait: events
// buffered that make no chunk do not count, and are read ahead; a chunk, a
// failure or the end does.
func TestReadyTranslated(t *testing.T) {
	s, w := pipeStream(t, &translation{dec: responses.NewDecoder(1)})
	go write(w, sseCreated+sseInProgress+ssePartAdded+"event: response.output_text.delta\ndata: {\"type\":")
	if c := mustNext(t, s); c.FinishReason != "" || c.Output {
		t.Fatalf("first chunk %s, want the role chunk", c.Raw)
	}
	// in_progress and content_part.added make no chunk; the delta is not
	// whole: Next would wait.
	if s.Ready() {
		t.Fatal("Ready with only chunkless events and half an event buffered")
	}
	go write(w, "\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hi\"}\n\n"+sseCompleted)
	if c := mustNext(t, s); !c.Output {
		t.Fatalf("chunk %s, want the text", c.Raw)
	}
	// The completed event is buffered: the finish and the usage-less end.
	if !s.Ready() {
		t.Fatal("not Ready with the terminal event buffered")
	}
	if c := mustNext(t, s); c.FinishReason != "stop" {
		t.Fatalf("chunk %s, want the finish", c.Raw)
	}
	if !s.Ready() {
		t.Error("not Ready at the end, which Next returns at once")
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("end %v, want io.EOF", err)
	}
	if s.Ready() {
		t.Error("Ready after the end")
	}
}

// TestReadyPassThrough: each event is a chunk; a malformed event read
// ahead is Ready, and Next then fails with it.
func TestReadyPassThrough(t *testing.T) {
	s, w := pipeStream(t, &passThrough{})
	go write(w, sseCreated+sseDelta+"data: {\"type\":\n\n")
	if c := mustNext(t, s); c.Event != "response.created" {
		t.Fatalf("chunk %s", c.Raw)
	}
	if !s.Ready() {
		t.Fatal("not Ready with an event buffered")
	}
	if c := mustNext(t, s); c.Event != "response.output_text.delta" || !c.Output {
		t.Fatalf("chunk %s", c.Raw)
	}
	if !s.Ready() {
		t.Fatal("not Ready with a malformed event buffered: Next fails at once")
	}
	_, err := s.Next()
	if pe, ok := err.(*llm.ProviderError); !ok || pe.Class != llm.FailTransient || pe.Message != "malformed upstream event" {
		t.Fatalf("Next: %v, want the malformed event's failure", err)
	}
	if s.Ready() {
		t.Error("Ready after the failure")
	}
}

// TestReadyClosed: a closed stream is never Ready, and gives nothing more
// even with chunks read ahead.
func TestReadyClosed(t *testing.T) {
	s, w := pipeStream(t, &passThrough{})
	go write(w, sseCreated+sseDelta)
	mustNext(t, s)
	if !s.Ready() {
		t.Fatal("not Ready with an event buffered")
	}
	s.Close()
	if s.Ready() {
		t.Error("Ready after Close")
	}
	if c, err := s.Next(); err != ErrClosed {
		t.Errorf("Next after Close: %s, %v; want ErrClosed", c.Raw, err)
	}
}
