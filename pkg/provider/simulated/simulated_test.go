package simulated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// chatBody is a Chat Completions request body as the gateway sends it.
func chatBody(t testing.TB, model string, messages ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"model":          model,
		"messages":       messages,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func msg(role string, content any) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func open(t testing.TB, p *Provider, body []byte) llm.ChunkStream {
	t.Helper()
	s, err := p.ChatStream(context.Background(), &llm.UpstreamRequest{Model: "route-model", Body: body})
	if err != nil {
		t.Fatalf("ChatStream: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// drain reads s to io.EOF, failing on any other error or on a stream that
// goes on for longer than any answer of this package can.
func drain(t testing.TB, s llm.ChunkStream) []llm.Chunk {
	t.Helper()
	var chunks []llm.Chunk
	for range maxWords + 4 {
		c, err := s.Next()
		if err == io.EOF {
			return chunks
		}
		if err != nil {
			t.Fatalf("Next after %d chunks: %v", len(chunks), err)
		}
		chunks = append(chunks, c)
	}
	t.Fatalf("no io.EOF after %d chunks", len(chunks))
	return nil
}

// text is the answer the chunks carry, as a client would assemble it.
func text(t testing.TB, chunks []llm.Chunk) string {
	t.Helper()
	var b strings.Builder
	for _, c := range chunks {
		var w struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(c.Raw, &w); err != nil {
			t.Fatalf("chunk %s: %v", c.Raw, err)
		}
		for _, ch := range w.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String()
}

func raws(chunks []llm.Chunk) []string {
	var out []string
	for _, c := range chunks {
		out = append(out, string(c.Raw))
	}
	return out
}

func TestName(t *testing.T) {
	if got := New("sim-eu", catalog.Simulated{}).Name(); got != "sim-eu" {
		t.Errorf("Name() = %q, want %q", got, "sim-eu")
	}
}

func TestChunkSequence(t *testing.T) {
	// "You are terse." is 14 bytes and "Hello there" 11: 25 bytes, 7 tokens.
	body := chatBody(t, "sim-small", msg("system", "You are terse."), msg("user", "Hello there"))
	tests := []struct {
		name      string
		words     int
		wantWords int
	}{
		{"default length", 0, 12},
		{"three words", 3, 3},
		{"one word", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, New("demo", catalog.Simulated{Words: tt.words}), body)
			chunks := drain(t, s)
			for range 2 {
				if _, err := s.Next(); err != io.EOF {
					t.Fatalf("Next after the end = %v, want io.EOF", err)
				}
			}

			if len(chunks) == 0 {
				t.Fatal("no chunks")
			}
			id := chunks[0].ID
			if !regexp.MustCompile(`^chatcmpl-sim-[0-9a-f]{16}$`).MatchString(id) {
				t.Errorf("id = %q, want chatcmpl-sim-<16 hex digits>", id)
			}

			type summary struct {
				ID           string
				Model        string
				Created      int64
				Output       bool
				FinishReason string
				HasChoices   bool
				Usage        *llm.Usage
			}
			summarize := func(c llm.Chunk) summary {
				return summary{c.ID, c.Model, c.Created, c.Output, c.FinishReason, c.HasChoices, c.Usage}
			}
			base := summary{ID: id, Model: "sim-small", Created: created, HasChoices: true}
			want := []summary{base}
			for range tt.wantWords {
				c := base
				c.Output = true
				want = append(want, c)
			}
			finish := base
			finish.FinishReason = "stop"
			usage := base
			usage.HasChoices = false
			usage.Usage = &llm.Usage{PromptTokens: 7, CompletionTokens: tt.wantWords, TotalTokens: 7 + tt.wantWords}
			usageJSON := fmt.Sprintf(`{"prompt_tokens":7,"completion_tokens":%d,"total_tokens":%d}`, tt.wantWords, 7+tt.wantWords)
			want = append(want, finish, usage)
			var got []summary
			for _, c := range chunks {
				got = append(got, summarize(c))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("chunks (-want +got):\n%s", diff)
			}

			// The chunks without text are exactly what OpenAI sends.
			head := fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","created":%d,"model":"sim-small","choices":`, id, created)
			wantRaw := []string{
				head + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
				head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				head + `[],"usage":` + usageJSON + `}`,
			}
			gotRaw := []string{string(chunks[0].Raw), string(chunks[len(chunks)-2].Raw), string(chunks[len(chunks)-1].Raw)}
			if diff := cmp.Diff(wantRaw, gotRaw); diff != "" {
				t.Errorf("raw chunks (-want +got):\n%s", diff)
			}

			// Each content chunk adds one " word", the first after the prefix.
			prefix := "Simulated answer from demo: "
			answer := text(t, chunks)
			if !strings.HasPrefix(answer, prefix) {
				t.Fatalf("answer %q does not start with %q", answer, prefix)
			}
			words := strings.Fields(strings.TrimPrefix(answer, prefix))
			if len(words) != tt.wantWords {
				t.Errorf("answer %q has %d words, want %d", answer, len(words), tt.wantWords)
			}
			for _, w := range words {
				if !slices.Contains(vocabulary[:], w) {
					t.Errorf("word %q is not in the vocabulary", w)
				}
			}
			piece := regexp.MustCompile(`^ [a-z]+$`)
			for i, c := range chunks[1 : 1+tt.wantWords] {
				got := text(t, []llm.Chunk{c})
				if c.Text != got {
					t.Errorf("content chunk %d: Text %q, want %q", i, c.Text, got)
				}
				if i == 0 {
					got = strings.TrimPrefix(got, strings.TrimSuffix(prefix, " "))
				}
				if !piece.MatchString(got) {
					t.Errorf("content chunk %d carries %q, want one \" word\"", i, got)
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	p := New("demo", catalog.Simulated{})
	hello := chatBody(t, "m", msg("user", "Hello there"))
	tests := []struct {
		name     string
		a, b     []byte
		sameText bool
	}{
		{"same body", hello, hello, true},
		{"other last user message", hello, chatBody(t, "m", msg("user", "Hello here")), false},
		{"only the last user message counts", hello,
			chatBody(t, "m", msg("user", "earlier"), msg("assistant", "reply"), msg("user", "Hello there")), true},
		{"a later assistant message does not count", hello,
			chatBody(t, "m", msg("user", "Hello there"), msg("assistant", "reply")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := drain(t, open(t, p, tt.a)), drain(t, open(t, p, tt.b))
			textA, textB := text(t, a), text(t, b)
			if (textA == textB) != tt.sameText {
				t.Errorf("answers %q and %q: same = %v, want %v", textA, textB, textA == textB, tt.sameText)
			}
			if string(tt.a) == string(tt.b) {
				if diff := cmp.Diff(raws(a), raws(b)); diff != "" {
					t.Errorf("same body, different chunks (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestContentParts(t *testing.T) {
	p := New("demo", catalog.Simulated{Words: 5})
	// The text parts of an array count as their concatenation: the same
	// answer and the same prompt_tokens as the string; other parts add none.
	asString := chatBody(t, "m", msg("user", "Describe this picture"))
	asParts := chatBody(t, "m", msg("user", []map[string]any{
		{"type": "text", "text": "Describe "},
		{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.png"}},
		{"type": "text", "text": "this picture"},
	}))
	want, got := drain(t, open(t, p, asString)), drain(t, open(t, p, asParts))
	if diff := cmp.Diff(raws(want), raws(got)); diff != "" {
		t.Errorf("parts vs string (-want +got):\n%s", diff)
	}
	// "Describe this picture" is 21 bytes: 6 tokens.
	if u := got[len(got)-1].Usage; u == nil || u.PromptTokens != 6 {
		t.Errorf("usage %+v, want prompt_tokens 6", u)
	}
}

func TestPromptTokens(t *testing.T) {
	tests := []struct {
		name     string
		messages []map[string]any
		want     int
	}{
		{"empty content counts as one token", []map[string]any{msg("user", "")}, 1},
		{"null content", []map[string]any{msg("assistant", nil), msg("user", "abcd")}, 1},
		{"rounded up", []map[string]any{msg("user", "abcde")}, 2},
		{"all messages", []map[string]any{msg("system", "abcd"), msg("user", "abcd"), msg("assistant", "abcd"), msg("user", "abcd")}, 4},
		{"bytes, not runes", []map[string]any{msg("user", "ééé")}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := drain(t, open(t, New("demo", catalog.Simulated{Words: 2}), chatBody(t, "m", tt.messages...)))
			u := chunks[len(chunks)-1].Usage
			if u == nil {
				t.Fatal("no usage")
			}
			want := &llm.Usage{PromptTokens: tt.want, CompletionTokens: 2, TotalTokens: tt.want + 2}
			if diff := cmp.Diff(want, u); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelFallsBackToRoute(t *testing.T) {
	// A body without a model (the gateway always sets one) still names one.
	s := open(t, New("demo", catalog.Simulated{Words: 1}), []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	c, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "route-model" {
		t.Errorf("model = %q, want the route's %q", c.Model, "route-model")
	}
}

func TestFailModes(t *testing.T) {
	body := chatBody(t, "m", msg("user", "hi"))
	tests := []struct {
		fail string
		want *llm.ProviderError
	}{
		{"error", &llm.ProviderError{Class: llm.FailTransient, Status: 500, Message: "simulated upstream error"}},
		{"throttle", &llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "simulated rate limit", RetryAfter: time.Second}},
		{"reject", &llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "simulated rejection"}},
		{"unknown", &llm.ProviderError{Class: llm.FailTransient, Message: `simulated provider demo: unknown fail mode "unknown"`}},
	}
	for _, tt := range tests {
		t.Run(tt.fail, func(t *testing.T) {
			p := New("demo", catalog.Simulated{Fail: tt.fail})
			s, err := p.ChatStream(context.Background(), &llm.UpstreamRequest{Body: body})
			if s != nil {
				t.Errorf("ChatStream returned a stream with error %v", err)
			}
			var got *llm.ProviderError
			if !errors.As(err, &got) {
				t.Fatalf("ChatStream error = %v, want a *llm.ProviderError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorWaitsFirstTokenLatency(t *testing.T) {
	const latency = 50 * time.Millisecond
	p := New("demo", catalog.Simulated{Fail: "error", FirstTokenLatency: catalog.Duration(latency)})
	start := time.Now()
	_, err := p.ChatStream(context.Background(), &llm.UpstreamRequest{Body: chatBody(t, "m", msg("user", "hi"))})
	if elapsed := time.Since(start); elapsed < latency {
		t.Errorf("error after %v, want at least %v", elapsed, latency)
	}
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 500 {
		t.Errorf("error = %v, want the simulated 500", err)
	}
}

// TestContextEndsCall covers the failure modes that wait: each returns the
// context's error, not a ProviderError, once the context is done.
func TestContextEndsCall(t *testing.T) {
	long := catalog.Duration(time.Hour)
	tests := []struct {
		name string
		cfg  catalog.Simulated
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"hang cancelled", catalog.Simulated{Fail: "hang"}, cancelAfter(20 * time.Millisecond), context.Canceled},
		{"hang deadline", catalog.Simulated{Fail: "hang"}, timeoutAfter(20 * time.Millisecond), context.DeadlineExceeded},
		{"error cancelled during its latency", catalog.Simulated{Fail: "error", FirstTokenLatency: long}, cancelAfter(20 * time.Millisecond), context.Canceled},
		{"already cancelled", catalog.Simulated{}, cancelAfter(0), context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			s, err := callWithin(t, 10*time.Second, func() (llm.ChunkStream, error) {
				return New("demo", tt.cfg).ChatStream(ctx, &llm.UpstreamRequest{Body: chatBody(t, "m", msg("user", "hi"))})
			})
			if s != nil {
				t.Errorf("ChatStream returned a stream with error %v", err)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error = %v, want one wrapping %v", err, tt.want)
			}
			var pe *llm.ProviderError
			if errors.As(err, &pe) {
				t.Errorf("error = %#v, want no *llm.ProviderError", pe)
			}
		})
	}
}

func cancelAfter(d time.Duration) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		if d <= 0 {
			cancel()
		} else {
			time.AfterFunc(d, cancel)
		}
		return ctx, cancel
	}
}

func timeoutAfter(d time.Duration) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), d)
	}
}

// callWithin runs f, failing the test if it has not returned by the limit:
// a generous bound that only catches a call that ignores its context.
func callWithin[T any](t *testing.T, limit time.Duration, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(limit):
		t.Fatalf("call still blocked after %v", limit)
		var zero T
		return zero, nil
	}
}

func TestLatency(t *testing.T) {
	const first, between = 50 * time.Millisecond, 20 * time.Millisecond
	p := New("demo", catalog.Simulated{Words: 2, FirstTokenLatency: catalog.Duration(first), ChunkLatency: catalog.Duration(between)})
	s := open(t, p, chatBody(t, "m", msg("user", "hi")))
	next := func() (llm.Chunk, time.Duration) {
		t.Helper()
		start := time.Now()
		c, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		return c, time.Since(start)
	}
	if c, _ := next(); c.Output {
		t.Fatal("first chunk has output, want the role chunk")
	}
	if c, d := next(); !c.Output || d < first {
		t.Errorf("first content chunk: output %v after %v, want output after at least %v", c.Output, d, first)
	}
	if c, d := next(); !c.Output || d < between {
		t.Errorf("second content chunk: output %v after %v, want output after at least %v", c.Output, d, between)
	}
}

func TestCancelMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New("demo", catalog.Simulated{FirstTokenLatency: catalog.Duration(time.Hour)})
	s, err := p.ChatStream(ctx, &llm.UpstreamRequest{Body: chatBody(t, "m", msg("user", "hi"))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); err != nil {
		t.Fatalf("role chunk: %v", err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	for i := range 2 {
		// The first call is cut while waiting; the second finds the stream
		// already ended by the cancellation.
		_, err := callWithin(t, 10*time.Second, func() (llm.Chunk, error) { return s.Next() })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Next #%d after cancel = %v, want one wrapping context.Canceled", i+1, err)
		}
	}
}

func TestClose(t *testing.T) {
	body := chatBody(t, "m", msg("user", "hi"))
	tests := []struct {
		name   string
		before int // chunks read before Close
	}{
		{"before any chunk", 0},
		{"mid-stream", 2},
		{"after the end", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, New("demo", catalog.Simulated{Words: 3}), body)
			for range tt.before {
				if _, err := s.Next(); err != nil && err != io.EOF {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			for range 2 {
				if _, err := s.Next(); !errors.Is(err, ErrClosed) {
					t.Errorf("Next after Close = %v, want ErrClosed", err)
				}
			}
		})
	}
}

func TestCloseUnblocksNext(t *testing.T) {
	s := open(t, New("demo", catalog.Simulated{FirstTokenLatency: catalog.Duration(time.Hour)}), chatBody(t, "m", msg("user", "hi")))
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, func() { s.Close() })
	_, err := callWithin(t, 10*time.Second, func() (llm.Chunk, error) { return s.Next() })
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Next interrupted by Close = %v, want ErrClosed", err)
	}
}

func TestMalformedBody(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"empty", ``},
		{"not JSON", `hello`},
		{"truncated", `{"model":"m","messages":[{"role":"user","content":"hi"}`},
		{"array", `[]`},
		{"null", `null`},
		{"no messages", `{"model":"m"}`},
		{"empty messages", `{"model":"m","messages":[]}`},
		{"messages not an array", `{"model":"m","messages":"hi"}`},
		{"model not a string", `{"model":1,"messages":[{"role":"user","content":"hi"}]}`},
		{"message not an object", `{"messages":[1]}`},
		{"null message", `{"messages":[null]}`},
		{"role not a string", `{"messages":[{"role":1,"content":"hi"}]}`},
		{"content a number", `{"messages":[{"role":"user","content":5}]}`},
		{"content an object", `{"messages":[{"role":"user","content":{"text":"hi"}}]}`},
		{"part not an object", `{"messages":[{"role":"user","content":["hi"]}]}`},
		{"null part", `{"messages":[{"role":"user","content":[null]}]}`},
		{"text not a string", `{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`},
	}
	p := New("demo", catalog.Simulated{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := p.ChatStream(context.Background(), &llm.UpstreamRequest{Body: []byte(tt.body)})
			if s != nil {
				t.Errorf("ChatStream returned a stream with error %v", err)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error = %v, want a *llm.ProviderError", err)
			}
			got := struct {
				Class  llm.FailureClass
				Status int
			}{pe.Class, pe.Status}
			want := struct {
				Class  llm.FailureClass
				Status int
			}{llm.FailRejected, 400}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error %v (-want +got):\n%s", err, diff)
			}
			if pe.Message == "" {
				t.Error("rejection without a message")
			}
		})
	}
	t.Run("nil request", func(t *testing.T) {
		_, err := p.ChatStream(context.Background(), nil)
		if pe := (*llm.ProviderError)(nil); !errors.As(err, &pe) || pe.Class != llm.FailRejected {
			t.Errorf("error = %v, want a rejection", err)
		}
	})
}

func FuzzChatStream(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`))
	f.Add([]byte(`{"model":"<\u00e9>","messages":[{"role":"assistant","content":null,"tool_calls":[]},{"role":"user"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"\xff\xfe"}]}`))
	f.Add([]byte(`{"messages":[null]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	p := New("fuzz", catalog.Simulated{Words: 3})
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := p.ChatStream(context.Background(), &llm.UpstreamRequest{Body: body})
		if err != nil {
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Class != llm.FailRejected || pe.Status != 400 {
				t.Fatalf("error = %v, want a 400 rejection", err)
			}
			return
		}
		defer s.Close()
		chunks := drain(t, s)
		if len(chunks) != 3+3 {
			t.Fatalf("%d chunks, want 6", len(chunks))
		}
		for _, c := range chunks {
			if !json.Valid(c.Raw) {
				t.Fatalf("chunk is not valid JSON: %q", c.Raw)
			}
		}
		if _, err := s.Next(); err != io.EOF {
			t.Fatalf("Next after the end = %v, want io.EOF", err)
		}
	})
}
