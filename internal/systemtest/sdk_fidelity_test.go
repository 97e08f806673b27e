package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// scriptedSSE scripts an upstream Chat Completions stream verbatim.
func scriptedSSE(chunks ...string) providertest.Response {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return providertest.Response{Body: b.String(), Header: map[string]string{"Content-Type": "text/event-stream"}}
}

// An upstream answer whose prompt of 100 tokens had 80 read from the cache.
var cachedAnswer = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"x","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":80}}}`,
}

// TestMessagesUsageCacheReads: Anthropic's usage counts cache reads
// apart: input_tokens is the uncached part of the prompt and
// cache_read_input_tokens the part read from the cache (total prompt =
// input_tokens + cache_creation_input_tokens + cache_read_input_tokens).
// The Messages API splits the prompt so (the Responses API reports the same
// count as input_tokens_details.cached_tokens); before, it reported the whole
// prompt as input_tokens and no cache_read_input_tokens, and an Anthropic
// client over-counted uncached input and saw no cache hits.
func TestMessagesUsageCacheReads(t *testing.T) {
	g := newGateway(t, setup{})
	ctx := context.Background()

	// The Responses API, same upstream answer: the cached count is there.
	g.ups[0].Script(scriptedSSE(cachedAnswer...))
	r, err := sdkClient(g).Responses.New(ctx, responsesParams("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage.InputTokensDetails.CachedTokens != 80 {
		t.Fatalf("responses cached_tokens %d, want 80", r.Usage.InputTokensDetails.CachedTokens)
	}

	client := anthropicClient(g.url)
	g.ups[0].Script(scriptedSSE(cachedAnswer...))
	msg, err := client.Messages.New(ctx, messageParams())
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.InputTokens != 20 || msg.Usage.CacheReadInputTokens != 80 {
		t.Errorf("message usage: input_tokens %d, cache_read_input_tokens %d; want 20 and 80: %s",
			msg.Usage.InputTokens, msg.Usage.CacheReadInputTokens, msg.Usage.RawJSON())
	}

	g.ups[0].Script(scriptedSSE(cachedAnswer...))
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
	if acc.Usage.InputTokens != 20 || acc.Usage.CacheReadInputTokens != 80 {
		t.Errorf("streamed (Accumulate) usage: input_tokens %d, cache_read_input_tokens %d; want 20 and 80",
			acc.Usage.InputTokens, acc.Usage.CacheReadInputTokens)
	}
}

// TestResponsesSDKInputFields: input fields openai-go offers and documents,
// which OpenAI's API accepts, are taken (they were refused with a 400): an
// input_image's detail "original" (ResponseInputImageDetailOriginal, "One of
// high, low, auto, or original") and an input message's phase ("preserve and
// resend phase on all assistant messages").
func TestResponsesSDKInputFields(t *testing.T) {
	g := newGateway(t, setup{})
	client := sdkClient(g)
	ctx := context.Background()

	img := responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
		{OfInputText: &responses.ResponseInputTextParam{Text: "What is this?"}},
		{OfInputImage: &responses.ResponseInputImageParam{Detail: responses.ResponseInputImageDetailOriginal, ImageURL: openai.String("https://example.com/a.png")}},
	}, responses.EasyInputMessageRoleUser)
	p := responsesParams("")
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{img}}
	if _, err := client.Responses.New(ctx, p); err != nil {
		t.Errorf("input_image detail \"original\": %s", openaiErrText(err))
	}

	prev := responses.ResponseInputItemParamOfMessage("Let me look.", responses.EasyInputMessageRoleAssistant)
	prev.OfMessage.Phase = responses.EasyInputMessagePhaseCommentary
	p = responsesParams("")
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleUser), prev,
		responses.ResponseInputItemParamOfMessage("go on", responses.EasyInputMessageRoleUser),
	}}
	if _, err := client.Responses.New(ctx, p); err != nil {
		t.Errorf("assistant message with phase: %s", openaiErrText(err))
	}
}

// TestResponsesEchoedSettings: the Response echoes the request's
// parallel_tool_calls and tool_choice, as OpenAI's does. Without tools the
// gateway (rightly) leaves them out of the upstream Chat request; the echo
// comes from the request itself (it came from that upstream body, and a
// request with parallel_tool_calls false and tool_choice "none" was answered
// with true and "auto").
func TestResponsesEchoedSettings(t *testing.T) {
	g := newGateway(t, setup{})
	client := sdkClient(g)
	p := responsesParams("hi")
	p.ParallelToolCalls = openai.Bool(false)
	p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsNone)}
	r, err := client.Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	var echo struct {
		Parallel   bool            `json:"parallel_tool_calls"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal([]byte(r.RawJSON()), &echo); err != nil {
		t.Fatal(err)
	}
	if echo.Parallel || string(echo.ToolChoice) != `"none"` {
		t.Errorf("echoed parallel_tool_calls %v, tool_choice %s; the request sent false and \"none\"", echo.Parallel, echo.ToolChoice)
	}
}

func openaiErrText(err error) string {
	var ae *openai.Error
	if errors.As(err, &ae) {
		return ae.RawJSON()
	}
	return err.Error()
}
