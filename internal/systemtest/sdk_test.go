package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// These tests drive buzzgate with the official OpenAI Go SDK, the way a
// client application would: whatever the gateway sends must parse, and the
// SDK must surface the gateway's answers and errors as its own types.

// sdkClient is an OpenAI SDK client pointed at the gateway. The SDK's own
// retries are off so that they hide no failure and add no upstream calls.
func sdkClient(g *gateway, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(g.url + "/api/v1/"),
		option.WithAPIKey(testKey),
		option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func sdkParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	}
}

func sdkStreamParams() openai.ChatCompletionNewParams {
	p := sdkParams("m")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	return p
}

func sdkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// usageCost reads the gateway's usage.cost, which the SDK keeps as an extra
// field of its CompletionUsage. ok is false when the field is absent or not
// a number. (The SDK marks every undeclared field's respjson.Field as not
// Valid, since it has no Go type to decode it into; Raw is the documented
// way to read it.)
func usageCost(u openai.CompletionUsage) (cost float64, ok bool) {
	f, present := u.JSON.ExtraFields["cost"]
	if !present {
		return 0, false
	}
	c, err := strconv.ParseFloat(f.Raw(), 64)
	if err != nil {
		return 0, false
	}
	return c, true
}

// sdkStream is what a client reads from one SDK stream.
type sdkStream struct {
	acc        openai.ChatCompletionAccumulator
	chunks     []openai.ChatCompletionChunk
	lastFinish string // finish_reason of the last chunk that had a choice
	err        error
}

func readSDKStream(t *testing.T, s *ssestream.Stream[openai.ChatCompletionChunk]) *sdkStream {
	t.Helper()
	defer s.Close()
	var r sdkStream
	for s.Next() {
		ch := s.Current()
		r.chunks = append(r.chunks, ch)
		if !r.acc.AddChunk(ch) {
			t.Errorf("the accumulator rejected chunk %s", ch.RawJSON())
		}
		if len(ch.Choices) > 0 {
			r.lastFinish = ch.Choices[len(ch.Choices)-1].FinishReason
		}
	}
	r.err = s.Err()
	return &r
}

func (r *sdkStream) text() string {
	var b strings.Builder
	for _, ch := range r.chunks {
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String()
}

// usageChunk returns the last chunk with a usage object, and how many
// chunks had one.
func (r *sdkStream) usageChunk() (openai.ChatCompletionChunk, int) {
	var found openai.ChatCompletionChunk
	n := 0
	for _, ch := range r.chunks {
		if ch.JSON.Usage.Valid() {
			found = ch
			n++
		}
	}
	return found, n
}

func TestSDKCompletion(t *testing.T) {
	g := newGateway(t, setup{})
	client := sdkClient(g)
	var httpResp *http.Response
	resp, err := client.Chat.Completions.New(sdkContext(t), sdkParams("m"), option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("%d choices: %s", len(resp.Choices), resp.RawJSON())
	}
	c := resp.Choices[0]
	if c.Message.Content != "Hello world" || c.FinishReason != "stop" || c.Message.Role != "assistant" {
		t.Errorf("choice = content %q finish %q role %q", c.Message.Content, c.FinishReason, c.Message.Role)
	}
	if resp.Object != "chat.completion" || resp.ID == "" {
		t.Errorf("object %q id %q", resp.Object, resp.ID)
	}
	// providertest: 10 prompt tokens, 2 completion tokens; p0 costs 1/M in, 2/M out.
	if resp.Usage.PromptTokens != 10 || resp.Usage.CompletionTokens != 2 || resp.Usage.TotalTokens != 12 {
		t.Errorf("usage = %s, want 10 + 2 = 12 tokens", resp.Usage.RawJSON())
	}
	if cost, ok := usageCost(resp.Usage); !ok || cost != 1.4e-05 {
		t.Errorf("usage.cost = %v (present %v) in %s, want 1.4e-05", cost, ok, resp.Usage.RawJSON())
	}
	if httpResp == nil {
		t.Fatal("WithResponseInto left the response nil")
	}
	if p, d := httpResp.Header.Get("X-Gateway-Provider"), httpResp.Header.Get("X-Gateway-Route-Depth"); p != "p0" || d != "0" {
		t.Errorf("x-gateway-provider %q depth %q, want p0 0", p, d)
	}
	if !strings.HasPrefix(httpResp.Header.Get("X-Request-Id"), "req_") {
		t.Errorf("x-request-id %q", httpResp.Header.Get("X-Request-Id"))
	}
	reqs := g.ups[0].Requests()
	if len(reqs) != 1 || reqs[0].JSON["model"] != "up-0" {
		t.Fatalf("upstream requests %d, first %v", len(reqs), reqs)
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

func TestSDKStreaming(t *testing.T) {
	g := newGateway(t, setup{})
	client := sdkClient(g)
	var httpResp *http.Response
	r := readSDKStream(t, client.Chat.Completions.NewStreaming(sdkContext(t), sdkStreamParams(), option.WithResponseInto(&httpResp)))
	if r.err != nil {
		t.Fatalf("stream.Err() = %v", r.err)
	}
	if httpResp == nil || httpResp.Header.Get("X-Gateway-Provider") != "p0" {
		t.Errorf("response %v: want x-gateway-provider p0", httpResp)
	}
	if len(r.acc.Choices) != 1 {
		t.Fatalf("accumulated %d choices", len(r.acc.Choices))
	}
	if got := r.acc.Choices[0].Message.Content; got != "Hello world" {
		t.Errorf("accumulated content %q, want %q", got, "Hello world")
	}
	if r.acc.Choices[0].FinishReason != "stop" {
		t.Errorf("accumulated finish_reason %q, want stop", r.acc.Choices[0].FinishReason)
	}
	if r.acc.Usage.PromptTokens != 10 || r.acc.Usage.CompletionTokens != 2 || r.acc.Usage.TotalTokens != 12 {
		t.Errorf("accumulated usage %+v, want 10 + 2 = 12 tokens", r.acc.Usage)
	}
	last := r.chunks[len(r.chunks)-1]
	if !last.JSON.Usage.Valid() || len(last.Choices) != 0 {
		t.Fatalf("last chunk %s: want the usage chunk, with no choices", last.RawJSON())
	}
	if cost, ok := usageCost(last.Usage); !ok || cost != 1.4e-05 {
		t.Errorf("usage.cost = %v (present %v) in %s, want 1.4e-05", cost, ok, last.RawJSON())
	}
	if _, n := r.usageChunk(); n != 1 {
		t.Errorf("%d usage chunks, want 1", n)
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

// TestSDKStreamFailsAfterOutput: a provider failure after output has started
// reaches the SDK as a stream error, after the text produced before it; the
// gateway does not fall back.
func TestSDKStreamFailsAfterOutput(t *testing.T) {
	for _, tt := range []struct {
		name string
		how  providertest.CutMode
	}{
		{"error event", providertest.CutError},
		{"connection reset", providertest.CutReset},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, setup{})
			g.ups[0].Script(providertest.Response{Text: []string{"one", " two", " three"}, Cut: &providertest.Cut{After: 2, How: tt.how}})
			r := readSDKStream(t, sdkClient(g).Chat.Completions.NewStreaming(sdkContext(t), sdkStreamParams()))
			if got := r.text(); got != "one two" {
				t.Errorf("text %q, want %q: what came before the failure, and nothing else", got, "one two")
			}
			if r.err == nil {
				t.Fatalf("stream.Err() is nil: the client cannot tell the failed answer from a complete one (last finish_reason %q)", r.lastFinish)
			}
			t.Logf("stream.Err() = %T: %v", r.err, r.err)
			var apiErr *openai.Error
			if errors.As(r.err, &apiErr) {
				t.Logf("the SDK raised an *openai.Error: status %d code %q", apiErr.StatusCode, apiErr.Code)
			}
			// The Go SDK raises an "error" event as a *ssestream.StreamError
			// that keeps the event; its error object is the gateway's.
			var se *ssestream.StreamError
			if !errors.As(r.err, &se) {
				t.Fatalf("stream.Err() is a %T, want *ssestream.StreamError", r.err)
			}
			var ev struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(se.Event.Data, &ev); err != nil {
				t.Fatalf("error event %q: %v", se.Event.Data, err)
			}
			if ev.Error.Code != "stream_interrupted" || ev.Error.Type != "server_error" || !strings.Contains(ev.Error.Message, "p0") {
				t.Errorf("error object %+v, want code stream_interrupted, type server_error, a message naming p0", ev.Error)
			}
			if !strings.Contains(se.Error(), "stream_interrupted") {
				t.Errorf("error text %q does not carry the code", se.Error())
			}
			// The usage chunk comes before the error: what was produced is
			// reported and billed.
			if u, n := r.usageChunk(); n != 1 {
				t.Errorf("%d usage chunks before the error, want 1", n)
			} else if cost, ok := usageCost(u.Usage); !ok || cost <= 0 {
				t.Errorf("usage chunk %s: want a positive cost", u.RawJSON())
			}
			if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
				t.Errorf("no fallback after output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSDKStreamJustStops: a provider stream that just stops is no error for
// the SDK; the last choice chunk's finish_reason "incomplete" is how the
// client tells the cut answer from a complete one.
func TestSDKStreamJustStops(t *testing.T) {
	g := newGateway(t, setup{})
	g.ups[0].Script(providertest.Response{Text: []string{"one", " two", " three"}, Cut: &providertest.Cut{After: 2, How: providertest.CutClose}})
	r := readSDKStream(t, sdkClient(g).Chat.Completions.NewStreaming(sdkContext(t), sdkStreamParams()))
	if r.err != nil {
		t.Fatalf("stream.Err() = %v, want nil", r.err)
	}
	if got := r.text(); got != "one two" {
		t.Errorf("text %q, want %q", got, "one two")
	}
	if r.lastFinish != "incomplete" {
		t.Errorf("last choice chunk's finish_reason %q, want incomplete", r.lastFinish)
	}
	if len(r.acc.Choices) != 1 || r.acc.Choices[0].FinishReason != "incomplete" || r.acc.Choices[0].Message.Content != "one two" {
		t.Errorf("accumulated %+v, want \"one two\" finishing incomplete", r.acc.Choices)
	}
	if u, n := r.usageChunk(); n != 1 {
		t.Errorf("%d usage chunks, want 1", n)
	} else if cost, ok := usageCost(u.Usage); !ok || cost <= 0 {
		t.Errorf("usage chunk %s: want a positive cost", u.RawJSON())
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("no fallback after output (-want +got):\n%s", diff)
	}
}

func TestSDKErrors(t *testing.T) {
	tests := []struct {
		name        string
		model       string
		key         string
		script      func(g *gateway)
		status      int
		code, param string
		message     string // "" = not checked
		calls       []int
	}{
		{
			name:  "provider 400",
			model: "m",
			script: func(g *gateway) {
				g.ups[0].Script(providertest.Response{Status: 400, Body: `{"error":{"message":"tools[0] is malformed"}}`})
			},
			status: 400, code: "provider_rejected",
			message: "provider rejected the request: tools[0] is malformed",
			calls:   []int{1, 0},
		},
		{name: "wrong key", model: "m", key: "sk-wrong-key-1234", status: 401, code: "invalid_api_key", calls: []int{0, 0}},
		{name: "unknown model", model: "nope", status: 404, code: "model_not_found", param: "model", calls: []int{0, 0}},
		{
			name:  "all providers fail",
			model: "m",
			script: func(g *gateway) {
				for _, u := range g.ups {
					u.SetDefault(providertest.Response{Status: 500})
				}
			},
			status: 502, code: "all_providers_failed",
			calls: []int{1, 1},
		},
	}
	check := func(t *testing.T, err error, status int, code, param, message string) {
		t.Helper()
		var e *openai.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %T %v, want *openai.Error", err, err)
		}
		if e.StatusCode != status || e.Code != code || e.Param != param {
			t.Errorf("status %d code %q param %q, want %d %q %q (%s)", e.StatusCode, e.Code, e.Param, status, code, param, e.RawJSON())
		}
		if e.Message == "" || e.Type == "" {
			t.Errorf("error without message or type: %s", e.RawJSON())
		}
		if message != "" && e.Message != message {
			t.Errorf("message %q, want %q", e.Message, message)
		}
		if e.Response == nil || e.Response.Header.Get("X-Request-Id") == "" {
			t.Error("error answer without x-request-id")
		}
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+"/stream="+strconv.FormatBool(stream), func(t *testing.T) {
				g := newGateway(t, setup{})
				if tt.script != nil {
					tt.script(g)
				}
				var opts []option.RequestOption
				if tt.key != "" {
					opts = append(opts, option.WithAPIKey(tt.key))
				}
				client := sdkClient(g, opts...)
				if stream {
					// No output started, so the error is the HTTP answer
					// itself, before any event.
					r := readSDKStream(t, client.Chat.Completions.NewStreaming(sdkContext(t), sdkParams(tt.model)))
					if len(r.chunks) != 0 {
						t.Errorf("%d chunks before the error", len(r.chunks))
					}
					check(t, r.err, tt.status, tt.code, tt.param, tt.message)
				} else {
					resp, err := client.Chat.Completions.New(sdkContext(t), sdkParams(tt.model))
					if err == nil {
						t.Fatalf("no error; answer %s", resp.RawJSON())
					}
					check(t, err, tt.status, tt.code, tt.param, tt.message)
				}
				if diff := cmp.Diff(tt.calls, g.calls()); diff != "" {
					t.Errorf("upstream calls (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestSDKModels(t *testing.T) {
	g := newGateway(t, setup{})
	page, err := sdkClient(g).Models.List(sdkContext(t))
	if err != nil {
		t.Fatalf("Models.List: %v", err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.ID == "m" {
			if m.Object != "model" || m.OwnedBy != "buzzgate" {
				t.Errorf("model %s", m.RawJSON())
			}
			if f, ok := m.JSON.ExtraFields["providers"]; !ok || !strings.Contains(f.Raw(), `"name":"p0"`) {
				t.Errorf("model %s: the providers are not readable through the SDK", m.RawJSON())
			}
		}
	}
	if !slices.Contains(ids, "m") {
		t.Errorf("model ids %q do not include m", ids)
	}

	var auto []string
	it := sdkClient(g).Models.ListAutoPaging(sdkContext(t))
	for it.Next() {
		auto = append(auto, it.Current().ID)
	}
	if it.Err() != nil || !slices.Equal(auto, ids) {
		t.Errorf("auto-paging gave %q (err %v), want %q", auto, it.Err(), ids)
	}

	_, err = sdkClient(g, option.WithAPIKey("sk-wrong-key-1234")).Models.List(sdkContext(t))
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 401 || e.Code != "invalid_api_key" {
		t.Errorf("wrong key: error %v, want *openai.Error 401 invalid_api_key", err)
	}
}

func TestSDKRefusal(t *testing.T) {
	const refusal = "I can't help with that"
	t.Run("not streaming", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{Refusal: refusal})
		resp, err := sdkClient(g).Chat.Completions.New(sdkContext(t), sdkParams("m"))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Refusal != refusal || resp.Choices[0].Message.Content != "" {
			t.Errorf("answer %s: want the refusal in message.refusal", resp.RawJSON())
		}
		if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
			t.Errorf("a refusal is not tried elsewhere (-want +got):\n%s", diff)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{Refusal: refusal})
		r := readSDKStream(t, sdkClient(g).Chat.Completions.NewStreaming(sdkContext(t), sdkStreamParams()))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.acc.Choices) != 1 || r.acc.Choices[0].Message.Refusal != refusal {
			t.Errorf("accumulated %+v: want the refusal", r.acc.Choices)
		}
		if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
			t.Errorf("a refusal is not tried elsewhere (-want +got):\n%s", diff)
		}
	})
}

func TestSDKToolCall(t *testing.T) {
	tc := &providertest.ToolCall{ID: "call_9", Name: "lookup", Arguments: `{"q":"buzz"}`}
	t.Run("not streaming", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{ToolCall: tc})
		resp, err := sdkClient(g).Chat.Completions.New(sdkContext(t), sdkParams("m"))
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if len(c.Message.ToolCalls) != 1 || c.FinishReason != "tool_calls" {
			t.Fatalf("answer %s: want one tool call", resp.RawJSON())
		}
		got := c.Message.ToolCalls[0]
		if got.ID != "call_9" || got.Type != "function" || got.Function.Name != "lookup" || got.Function.Arguments != `{"q":"buzz"}` {
			t.Errorf("tool call %s", got.RawJSON())
		}
	})
	t.Run("streaming", func(t *testing.T) {
		g := newGateway(t, setup{})
		g.ups[0].Script(providertest.Response{ToolCall: tc})
		r := readSDKStream(t, sdkClient(g).Chat.Completions.NewStreaming(sdkContext(t), sdkStreamParams()))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.acc.Choices) != 1 || len(r.acc.Choices[0].Message.ToolCalls) != 1 || r.acc.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("accumulated %+v: want one tool call", r.acc.Choices)
		}
		got := r.acc.Choices[0].Message.ToolCalls[0]
		if got.ID != "call_9" || got.Function.Name != "lookup" || got.Function.Arguments != `{"q":"buzz"}` {
			t.Errorf("accumulated tool call %+v", got)
		}
	})
}
