//go:build integration

package systemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestNodeSDKClaudeCodeOnAnthropicRoute: Claude Code's requests, as the
// official Node SDK sends them, pass through an anthropic route: the
// upstream gets each body member byte for byte as the SDK wrote it (the
// route's model in place of the client's) with the betas, and the SDK reads
// every event, thinking and its signature included.
func TestNodeSDKClaudeCodeOnAnthropicRoute(t *testing.T) {
	nodeSDKClaudeCode(t, "anthropic")
}

// TestNodeSDKClaudeCodeOnBedrockRoute: the same on a Bedrock Claude route:
// the fake Bedrock Runtime, which checks every call's SigV4 signature, gets
// InvokeModelWithResponseStream of the route's model with each body member
// byte for byte but model and stream, plus anthropic_version and the betas
// as anthropic_beta; the SDK reads the events Bedrock wrapped, unchanged.
func TestNodeSDKClaudeCodeOnBedrockRoute(t *testing.T) {
	nodeSDKClaudeCode(t, "bedrock")
}

func nodeSDKClaudeCode(t *testing.T, route string) {
	url, claude, openai := pairGateway(t, route)
	claude.SetDefault(providertest.Response{Body: claudeStream, Header: map[string]string{"Content-Type": "text/event-stream"}})
	var got struct {
		Sent []struct {
			URL, Body, Beta string
		}
		Events   []string
		Streamed struct {
			Blocks []struct {
				Type                      string
				Text, Thinking, Signature *string
				Input                     map[string]any
			}
			StopReason string `json:"stop_reason"`
			Usage      map[string]any
		}
		Created json.RawMessage
	}
	runNodeSDK(t, "anthropic_claude_code.mjs", url, &got)
	if len(got.Sent) != 2 || claude.Calls() != 2 || openai.Calls() != 0 {
		t.Fatalf("SDK sent %d requests; upstream calls anthropic %d, openai %d; want 2, 2, 0", len(got.Sent), claude.Calls(), openai.Calls())
	}
	for i, s := range got.Sent {
		if !strings.Contains(s.URL, "/api/v1/messages") {
			t.Errorf("request %d went to %s, want the Messages path", i, s.URL)
		}
		up := claude.Requests()[i]
		if s.Beta == "" {
			t.Fatalf("request %d: the SDK sent no anthropic-beta", i)
		}
		if route == "bedrock" {
			betas, _ := json.Marshal(strings.Split(s.Beta, ","))
			sameMembers(t, up.Body, []byte(s.Body), map[string]string{"model": "", "stream": "", "anthropic_version": `"bedrock-2023-05-31"`, "anthropic_beta": string(betas)})
			if want := "/model/" + bedrockClaude + providertest.BedrockStreamSuffix; up.Path != want {
				t.Errorf("request %d: Bedrock call %s, want %s", i, up.Path, want)
			}
			continue
		}
		sameMembers(t, up.Body, []byte(s.Body), map[string]string{"model": `"claude-x"`, "stream": "true"})
		if up.Header.Get("Anthropic-Beta") != s.Beta {
			t.Errorf("request %d: upstream anthropic-beta %q, SDK sent %q", i, up.Header.Get("Anthropic-Beta"), s.Beta)
		}
	}
	want := []string{"message_start", "content_block_start:thinking", "content_block_delta:thinking_delta", "content_block_delta:thinking_delta",
		"content_block_delta:signature_delta", "content_block_stop", "content_block_start:text", "content_block_delta:text_delta", "content_block_stop",
		"content_block_start:tool_use", "content_block_delta:input_json_delta", "content_block_delta:input_json_delta", "content_block_stop",
		"future_event", "message_delta:undefined", "message_stop"}
	if strings.Join(got.Events, " ") != strings.Join(want, " ") {
		t.Errorf("SDK events:\n%v\nwant\n%v", got.Events, want)
	}
	b := got.Streamed.Blocks
	if len(b) != 3 || *b[0].Thinking != "I will print the word." || *b[0].Signature != "EqQBCkYIBxgCKkA-sig" ||
		*b[1].Text != "Running it." || b[2].Input["command"] != "echo hi" || got.Streamed.StopReason != "tool_use" {
		t.Errorf("streamed message: %+v", got.Streamed)
	}
	// The SDK's accumulated message keeps the usage fields it knows; the
	// cost is in the message_delta event (checked by
	// TestClaudeCodePassesThrough) and in a whole message.
	if got.Streamed.Usage["cache_read_input_tokens"] != 9000.0 || got.Streamed.Usage["cache_creation_input_tokens"] != 100.0 {
		t.Errorf("streamed usage: %v", got.Streamed.Usage)
	}
	var created struct {
		Blocks []map[string]any
		Usage  map[string]any
	}
	json.Unmarshal(got.Created, &created)
	if len(created.Blocks) != 3 || created.Blocks[0]["signature"] != "EqQBCkYIBxgCKkA-sig" {
		t.Errorf("created message: %s", got.Created)
	}
	// 12 + 100 + 9000 prompt tokens at 1 USD, 40 output at 2 USD per million.
	if created.Usage["cost"] != 0.009192 {
		t.Errorf("created usage: %v, want cost 0.009192", created.Usage)
	}
}

// TestGoSDKClaudeCodeOnAnthropicRoute: a Claude Code-shaped turn sent with
// anthropic-sdk-go's beta Messages API (thinking with its signature sent
// back, cache_control on system blocks, a system entry inside messages,
// output_config, context_management, metadata.user_id, a large max_tokens,
// tools, betas) passes through an anthropic route member for member, and
// the SDK reads the provider's events, thinking and signature included.
func TestGoSDKClaudeCodeOnAnthropicRoute(t *testing.T) {
	goSDKClaudeCode(t, "anthropic")
}

// TestGoSDKClaudeCodeOnBedrockRoute: the same turn through a Bedrock Claude
// route: Bedrock gets every member as the SDK wrote it but model and
// stream, with anthropic_version and the betas in anthropic_beta.
func TestGoSDKClaudeCodeOnBedrockRoute(t *testing.T) {
	goSDKClaudeCode(t, "bedrock")
}

func goSDKClaudeCode(t *testing.T, route string) {
	url, claude, openai := pairGateway(t, route)
	claude.SetDefault(providertest.Response{Body: claudeStream, Header: map[string]string{"Content-Type": "text/event-stream"}})
	var sent [][]byte
	record := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		sent = append(sent, b)
		r.Body = io.NopCloser(bytes.NewReader(b))
		return next(r)
	})
	client := anthropicClient(url, record)
	cached := anthropic.NewBetaCacheControlEphemeralParam()
	params := anthropic.BetaMessageNewParams{
		Model:     "m",
		MaxTokens: 128000,
		System: []anthropic.BetaTextBlockParam{
			{Text: "You are Claude Code."},
			{Text: "Be terse.", CacheControl: cached},
		},
		Messages: []anthropic.BetaMessageParam{
			anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Print a word.")),
			{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
				anthropic.NewBetaThinkingBlock("EqQBCkYIBxgCKkA-example-signature", "I will print the word."),
				anthropic.NewBetaToolUseBlock("toolu_01Example", map[string]any{"command": "echo hello"}, "Bash"),
			}}},
			anthropic.NewBetaUserMessage(anthropic.NewBetaToolResultBlock("toolu_01Example", "hello", false)),
		},
		Tools: []anthropic.BetaToolUnionParam{{OfTool: &anthropic.BetaToolParam{Name: "Bash",
			InputSchema: anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}, Required: []string{"command"}}}}},
		Betas:    []anthropic.AnthropicBeta{"claude-code-20250219", "interleaved-thinking-2025-05-14", "context-management-2025-06-27", "effort-2025-11-24"},
		Metadata: anthropic.BetaMetadataParam{UserID: anthropic.String("user_0123")},
	}
	extra := []option.RequestOption{
		option.WithJSONSet("thinking", map[string]any{"type": "adaptive"}),
		option.WithJSONSet("output_config", map[string]any{"effort": "medium"}),
		option.WithJSONSet("context_management", map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}}),
		option.WithJSONSet("messages.3", map[string]any{"role": "system", "content": "A reminder."}),
	}
	s := client.Beta.Messages.NewStreaming(context.Background(), params, extra...)
	var acc anthropic.BetaMessage
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || claude.Calls() != 1 || openai.Calls() != 0 {
		t.Fatalf("SDK sent %d, upstream calls anthropic %d, openai %d; want 1, 1, 0", len(sent), claude.Calls(), openai.Calls())
	}
	up := claude.Requests()[0]
	betas := up.Header.Get("Anthropic-Beta")
	if route == "bedrock" {
		var body struct {
			Beta []string `json:"anthropic_beta"`
		}
		json.Unmarshal(up.Body, &body)
		betas = strings.Join(body.Beta, ",")
		sameMembers(t, up.Body, sent[0], map[string]string{"model": "", "stream": "", "anthropic_version": `"bedrock-2023-05-31"`, "anthropic_beta": "*"})
	} else {
		sameMembers(t, up.Body, sent[0], map[string]string{"model": `"claude-x"`, "stream": "true"})
	}
	for _, f := range []string{"thinking", "output_config", "context_management", "metadata", "system", "tools"} {
		if _, ok := up.JSON[f]; !ok {
			t.Errorf("the upstream got no %s", f)
		}
	}
	if msgs, _ := up.JSON["messages"].([]any); len(msgs) != 4 || msgs[3].(map[string]any)["role"] != "system" ||
		!strings.Contains(string(up.Body), `"signature":"EqQBCkYIBxgCKkA-example-signature"`) {
		t.Errorf("upstream messages: %v", up.JSON["messages"])
	}
	if !strings.Contains(betas, "claude-code-20250219") || !strings.Contains(betas, "effort-2025-11-24") {
		t.Errorf("upstream betas %q", betas)
	}
	if len(types) != 16 || types[13] != "future_event" {
		t.Errorf("SDK events %v", types)
	}
	if len(acc.Content) != 3 || acc.Content[0].Signature != "EqQBCkYIBxgCKkA-sig" || acc.Content[0].Thinking != "I will print the word." ||
		acc.Content[2].Name != "Bash" || string(acc.StopReason) != "tool_use" || acc.Usage.CacheReadInputTokens != 9000 {
		t.Errorf("accumulated message: %+v", acc)
	}
}
