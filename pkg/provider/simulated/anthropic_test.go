package simulated

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
)

// TestAnthropicProtocol: the same conversation gets the same words on
// either protocol, and the Anthropic one arrives as the anthropic adapter
// decodes a Messages stream: role chunk, text, finish "stop", usage.
func TestAnthropicProtocol(t *testing.T) {
	body := chatBody(t, "m", msg("system", "be brief"), msg("user", "hello there"))
	oa := drain(t, open(t, New("sim", catalog.Simulated{Words: 5}), body))
	an := drain(t, open(t, New("sim", catalog.Simulated{Words: 5, Protocol: "anthropic"}), body))

	if got, want := text(t, an), text(t, oa); got != want || !strings.HasPrefix(got, "Simulated answer from sim:") {
		t.Errorf("anthropic text %q, openai text %q", got, want)
	}
	if len(an) != 5+3 { // role, 5 words, finish, usage
		t.Fatalf("%d chunks:\n%s", len(an), strings.Join(raws(an), "\n"))
	}
	if c := an[0]; c.Output || c.ID == "" || !strings.HasPrefix(c.ID, "msg_sim_") || c.Model != "route-model" || c.Created != created {
		t.Errorf("first chunk %s", c.Raw)
	}
	if f := an[len(an)-2].FinishReason; f != "stop" {
		t.Errorf("finish %q", f)
	}
	if u := an[len(an)-1].Usage; u == nil || u.CompletionTokens != 5 || u.PromptTokens < 1 {
		t.Errorf("usage %+v", u)
	}
	// Deterministic bytes: the same request, the same stream.
	again := drain(t, open(t, New("sim", catalog.Simulated{Words: 5, Protocol: "anthropic"}), body))
	if strings.Join(raws(again), "\n") != strings.Join(raws(an), "\n") {
		t.Errorf("not deterministic")
	}
}

func TestAnthropicProtocolFailModes(t *testing.T) {
	body := chatBody(t, "m", msg("user", "hi"))
	tests := []struct {
		fail string
		want llm.ProviderError
	}{
		{"error", llm.ProviderError{Class: llm.FailTransient, Status: 529, Message: "upstream status 529"}},
		{"throttle", llm.ProviderError{Class: llm.FailThrottled, Status: 429, Message: "upstream status 429", RetryAfter: time.Second}},
		{"reject", llm.ProviderError{Class: llm.FailRejected, Status: 400, Message: "simulated rejection"}},
	}
	for _, tt := range tests {
		t.Run(tt.fail, func(t *testing.T) {
			_, err := New("sim", catalog.Simulated{Fail: tt.fail, Protocol: "anthropic"}).ChatStream(context.Background(), &llm.UpstreamRequest{Body: body})
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v", err)
			}
			pe.Err = nil
			if *pe != tt.want {
				t.Errorf("got %+v, want %+v", *pe, tt.want)
			}
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := New("sim", catalog.Simulated{Fail: "hang", Protocol: "anthropic"}).ChatStream(ctx, &llm.UpstreamRequest{Body: body})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: %v", err)
	}
}

func TestAnthropicProtocolCloseAndCancel(t *testing.T) {
	body := chatBody(t, "m", msg("user", "hi"))
	p := New("sim", catalog.Simulated{Protocol: "anthropic", FirstTokenLatency: catalog.Duration(time.Hour)})

	s := open(t, p, body)
	if _, err := s.Next(); err != nil { // the role chunk comes at once
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, func() { s.Close() })
	if _, err := s.Next(); !errors.Is(err, anthropic.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	s, err := p.ChatStream(ctx, &llm.UpstreamRequest{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Next()
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
}

func TestAnthropicProtocolRejectsUntranslatable(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`)
	_, err := New("sim", catalog.Simulated{Protocol: "anthropic"}).ChatStream(context.Background(), &llm.UpstreamRequest{Body: body})
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Class != llm.FailRejected {
		t.Errorf("error %v, want rejected", err)
	}
}
