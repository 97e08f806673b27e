package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

func anthropicClient(url string, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(url + "/api/"), option.WithAPIKey(testKey), option.WithMaxRetries(0),
	}, opts...)...)
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "m",
		MaxTokens: 64,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
}

// TestMessagesSDK drives POST /api/v1/messages with the official Anthropic
// Go SDK (x-api-key auth, base URL <host>/api/): a message, a stream, a tool
// call, a replay with the same Idempotency-Key (no second provider call)
// and a 409 conflict the SDK raises as an error with status 409.
func TestMessagesSDK(t *testing.T) {
	g := newGateway(t, setup{})
	client := anthropicClient(g.url)
	ctx := context.Background()

	msg, err := client.Messages.New(ctx, messageParams())
	if err != nil {
		t.Fatal(err)
	}
	if msg.Role != "assistant" || len(msg.Content) != 1 || msg.Content[0].Text != "Hello world" || msg.StopReason != "end_turn" ||
		msg.Usage.InputTokens != 10 || msg.Usage.OutputTokens != 2 || !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("message: %+v", msg)
	}
	if !strings.Contains(msg.RawJSON(), `"cost":`) {
		t.Errorf("usage without cost: %s", msg.RawJSON())
	}
	up := g.ups[0].Requests()[0].JSON
	if up["max_completion_tokens"] != 64.0 || up["messages"].([]any)[0].(map[string]any)["role"] != "system" {
		t.Errorf("the upstream request: %v", up)
	}

	stream := client.Messages.NewStreaming(ctx, messageParams())
	defer stream.Close()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != "Hello world" || acc.StopReason != "end_turn" || acc.Usage.OutputTokens != 2 {
		t.Errorf("stream: %+v", acc)
	}

	g.ups[0].Script(providertest.Response{ToolCall: &providertest.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}})
	p := messageParams()
	p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
	tool, err := client.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if tool.StopReason != "tool_use" || len(tool.Content) != 1 || tool.Content[0].Type != "tool_use" || tool.Content[0].Name != "get_weather" ||
		string(tool.Content[0].Input) != `{"city":"Paris"}` {
		t.Errorf("tool call: %s", tool.RawJSON())
	}

	calls := g.ups[0].Calls()
	idem := option.WithHeader("Idempotency-Key", key(t))
	first, err := client.Messages.New(ctx, messageParams(), idem)
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.Messages.New(ctx, messageParams(), idem)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first.RawJSON(), again.RawJSON()); diff != "" || g.ups[0].Calls() != calls+1 {
		t.Errorf("replay (-first +again):\n%s\nupstream calls %d, want %d", diff, g.ups[0].Calls(), calls+1)
	}
	changed := messageParams()
	changed.MaxTokens = 65
	_, err = client.Messages.New(ctx, changed, idem)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || !strings.Contains(apiErr.RawJSON(), `"idempotency_conflict"`) {
		t.Errorf("a changed body with the same key: %v", err)
	}
	// The same key on Chat Completions is another record: it runs.
	if a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t)); a.status != 200 || a.replayed != "" {
		t.Errorf("the same key on chat completions: %d replayed=%q", a.status, a.replayed)
	}
}

// TestMessagesHTTP: Messages errors come in Anthropic's envelope with the
// gateway's code (max_tokens required, a missing key, a wrong method); a
// keyed stream's named events replay byte for byte; a provider failure
// after output ends the stream with an error event that the SDK raises.
func TestMessagesHTTP(t *testing.T) {
	g := newGateway(t, setup{})
	post := func(body string, header ...string) answer {
		h := append([]string{"Authorization", "", "X-Api-Key", testKey, "Anthropic-Version", "2023-06-01"}, header...)
		return callPath(t, g.url+"/api/v1/messages", body, h...)
	}
	const msgBody = `{"model":"m","max_tokens":32,"messages":[{"role":"user","content":"Say hello"}]`
	for _, c := range []struct {
		name, body string
		header     []string
		status     int
		typ, code  string
	}{
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil, 400, "invalid_request_error", "invalid_request"},
		{"no key", msgBody + "}", []string{"X-Api-Key", ""}, 401, "authentication_error", "invalid_api_key"},
		{"unknown model", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil, 404, "not_found_error", "model_not_found"},
	} {
		a := post(c.body, c.header...)
		var env struct {
			Type  string
			Error struct{ Type, Code, Message string }
		}
		json.Unmarshal([]byte(a.body), &env)
		if a.status != c.status || env.Type != "error" || env.Error.Type != c.typ || env.Error.Code != c.code || env.Error.Message == "" {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
		}
	}

	stream := msgBody + `,"stream":true}`
	first := post(stream, "Idempotency-Key", key(t))
	replay := post(stream, "Idempotency-Key", key(t))
	if first.status != 200 || !strings.HasPrefix(first.body, "event: message_start\ndata: ") || !strings.Contains(first.body, "event: message_stop\n") {
		t.Fatalf("stream: %d %q", first.status, first.body)
	}
	if replay.replayed != "true" || replay.body != first.body || g.ups[0].Calls() != 1 {
		t.Errorf("replay: replayed=%q, same body %v, upstream calls %d", replay.replayed, replay.body == first.body, g.ups[0].Calls())
	}

	g.ups[0].Script(providertest.Response{Text: []string{"a", "b", "c"}, Cut: &providertest.Cut{After: 2, How: providertest.CutError}})
	client := anthropicClient(g.url)
	s := client.Messages.NewStreaming(context.Background(), messageParams())
	defer s.Close()
	n := 0
	for s.Next() {
		n++
	}
	if err := s.Err(); err == nil || n == 0 {
		t.Errorf("a failure after output: %d events, err %v; want events, then an error", n, err)
	}
}

// TestMessagesSDKRefusal: a provider's refusal reaches the Anthropic SDK as
// Anthropic's own: the refusal text and stop_reason "refusal".
func TestMessagesSDKRefusal(t *testing.T) {
	g := newGateway(t, setup{})
	g.ups[0].Script(providertest.Response{Refusal: "I can't help with that."})
	client := anthropicClient(g.url)
	msg, err := client.Messages.New(context.Background(), messageParams())
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "refusal" || len(msg.Content) != 1 || msg.Content[0].Text != "I can't help with that." {
		t.Errorf("refusal: %s", msg.RawJSON())
	}
	if calls := g.calls(); calls[1] != 0 {
		t.Errorf("a refusal was tried elsewhere: upstream calls %v", calls)
	}
}
