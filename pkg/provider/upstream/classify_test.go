package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                    true,
		"application/json; charset=utf-8":     true,
		"Application/JSON":                    true,
		"application/problem+json":            true,
		"text/event-stream":                   false,
		"text/event-stream; charset=utf-8":    false,
		"":                                    false,
		"application/json; charset=":          false, // unparseable: read as a stream
		"application/jsonl":                   false,
		"text/plain":                          false,
		"application/vnd.api+json; version=1": true,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}

// isJSONParsed is IsJSON without its shortcut for the two usual types.
func isJSONParsed(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func FuzzIsJSON(f *testing.F) {
	for _, ct := range []string{"application/json", "text/event-stream", "Application/JSON", "application/json; charset=utf-8", "text/event-stream ", "application/problem+json", ""} {
		f.Add(ct)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		if got, want := IsJSON(ct), isJSONParsed(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, parsed: %v", ct, got, want)
		}
	})
}

// BenchmarkIsJSON is the check of every 200 answer's Content-Type, on the
// type an event stream has, against parsing it.
func BenchmarkIsJSON(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func(string) bool
	}{{"IsJSON", IsJSON}, {"parsed", isJSONParsed}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.f("text/event-stream") {
					b.Fatal("an event stream read as JSON")
				}
			}
		})
	}
}

func TestStatusError(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	h := http.Header{"Retry-After-Ms": {"1500"}}
	tests := []struct {
		status int
		body   string
		class  llm.FailureClass
		msg    string
		retry  time.Duration
	}{
		{429, "", llm.FailThrottled, "upstream status 429", 1500 * time.Millisecond},
		{400, `{"error":{"message":"max_tokens is too large"}}`, llm.FailRejected, "max_tokens is too large", 0},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"bad role"}}`, llm.FailRejected, "bad role", 0},
		{500, "boom", llm.FailTransient, "upstream status 500", 0},
		{529, `{"type":"error","error":{"type":"overloaded_error"}}`, llm.FailTransient, "upstream status 529", 0},
		{401, "", llm.FailConfig, "upstream status 401", 0},
		{403, "", llm.FailConfig, "upstream status 403", 0},
		{404, "", llm.FailConfig, "upstream status 404", 0},
	}
	for _, api := range []llm.Proto{llm.ProtoChat, llm.ProtoMessages, llm.ProtoResponses} {
		for _, tt := range tests {
			pe := StatusError(api, tt.status, h, []byte(tt.body), now)
			if pe.Class != tt.class || pe.Status != tt.status || pe.Message != tt.msg || pe.RetryAfter != tt.retry {
				t.Errorf("%v: StatusError(%d, %q) = %+v, want class %v, message %q, retry %v", api, tt.status, tt.body, pe, tt.class, tt.msg, tt.retry)
			}
		}
	}
}

// TestStatusErrorWhoseFault: a 404 (or a 400) is the operator's (FailConfig:
// the route goes out, the next provider is tried) only when the provider's
// own body says the route's model, the URL or the key is wrong; a 404
// about something the request named is the client's (FailRejected, with
// the provider's message). The bodies are the providers' own.
func TestStatusErrorWhoseFault(t *testing.T) {
	const (
		anthropicModel   = `{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonnet-4-5-x"},"request_id":"req_011CVz"}`
		anthropicFile    = `{"type":"error","error":{"type":"not_found_error","message":"File not found: file_011CNha8iCJcU1wXNR6q4V8w"},"request_id":"req_011CVz"}`
		anthropicPath    = `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`
		anthropicKey     = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`
		anthropicPerm    = `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`
		openaiModel      = `{"error":{"message":"The model ` + "`gpt-5-x`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
		openaiNotChat    = `{"error":{"message":"This is not a chat model and thus not supported in the v1/chat/completions endpoint. Did you mean to use v1/completions?","type":"invalid_request_error","param":"model","code":null}}`
		openaiURL        = `{"error":{"message":"Invalid URL (POST /v1/chat/completionz)","type":"invalid_request_error","param":null,"code":null}}`
		openaiKey        = `{"error":{"message":"Incorrect API key provided: sk-proj-****abcd. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
		openaiItem       = `{"error":{"message":"Item with id 'msg_0ead8b004a3b165d0069436a6b68' not found.","type":"invalid_request_error","param":"input","code":null}}`
		openaiStoreFalse = `{"error":{"message":"Item with id 'rs_missing' not found. Items are not persisted when ` + "`store`" + ` is set to false. Try again with ` + "`store`" + ` set to true, or remove this item from your input.","type":"invalid_request_error","param":"input","code":null}}`
		openaiConv       = `{"error":{"message":"Conversation with id 'conv_probe_does_not_exist' not found.","type":"invalid_request_error","param":null,"code":null}}`
		openaiPrompt     = `{"error":{"message":"Prompt with id 'pmpt_probe_does_not_exist' not found.","type":"invalid_request_error","param":null,"code":null}}`
		openaiToolModel  = `{"error":{"message":"The model ` + "`gpt-image-x`" + ` does not exist.","type":"invalid_request_error","param":"tools[0].model","code":"model_not_found"}}`
		ollamaModel      = `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`
		vllmModel        = `{"object":"error","message":"The model ` + "`llama9`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`
		azureDeployment  = `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`
		html             = `<html><body><h1>404 Not Found</h1></body></html>`
	)
	tests := []struct {
		name   string
		api    llm.Proto
		status int
		body   string
		class  llm.FailureClass
		msg    string
	}{
		{"anthropic: unknown model", llm.ProtoMessages, 404, anthropicModel, llm.FailConfig, "upstream status 404"},
		{"anthropic: unknown path", llm.ProtoMessages, 404, anthropicPath, llm.FailConfig, "upstream status 404"},
		{"anthropic: a document's file_id", llm.ProtoMessages, 404, anthropicFile, llm.FailRejected, "File not found: file_011CNha8iCJcU1wXNR6q4V8w"},
		{"anthropic: a refused key", llm.ProtoMessages, 401, anthropicKey, llm.FailConfig, "upstream status 401"},
		{"anthropic: a key without permission", llm.ProtoMessages, 403, anthropicPerm, llm.FailConfig, "upstream status 403"},
		{"anthropic: an HTML page", llm.ProtoMessages, 404, html, llm.FailConfig, "upstream status 404"},
		{"anthropic: OpenAI's model_not_found words mean nothing", llm.ProtoMessages, 400, openaiModel, llm.FailRejected, "The model `gpt-5-x` does not exist or you do not have access to it."},

		{"chat: unknown model", llm.ProtoChat, 404, openaiModel, llm.FailConfig, "upstream status 404"},
		{"chat: unknown model, as a 400", llm.ProtoChat, 400, openaiModel, llm.FailConfig, "upstream status 400"},
		{"chat: not a chat model", llm.ProtoChat, 404, openaiNotChat, llm.FailConfig, "upstream status 404"},
		{"chat: a wrong base_url", llm.ProtoChat, 404, openaiURL, llm.FailConfig, "upstream status 404"},
		{"chat: an HTML page", llm.ProtoChat, 404, html, llm.FailConfig, "upstream status 404"},
		{"chat: no body", llm.ProtoChat, 404, "", llm.FailConfig, "upstream status 404"},
		{"chat: a refused key, its text not kept", llm.ProtoChat, 401, openaiKey, llm.FailConfig, "upstream status 401"},
		{"chat: Ollama's unknown model", llm.ProtoChat, 404, ollamaModel, llm.FailConfig, "upstream status 404"},
		{"chat: vLLM's unknown model", llm.ProtoChat, 404, vllmModel, llm.FailConfig, "upstream status 404"},
		{"chat: Azure's unknown deployment", llm.ProtoChat, 404, azureDeployment, llm.FailConfig, "upstream status 404"},
		{"chat: a file the client named", llm.ProtoChat, 404, `{"error":{"message":"File with id 'file-abc123' not found.","type":"invalid_request_error","param":"messages[0].content[1].file.file_id","code":null}}`,
			llm.FailRejected, "File with id 'file-abc123' not found."},

		{"responses: unknown model", llm.ProtoResponses, 404, openaiModel, llm.FailConfig, "upstream status 404"},
		{"responses: an item_reference", llm.ProtoResponses, 404, openaiItem, llm.FailRejected, "Item with id 'msg_0ead8b004a3b165d0069436a6b68' not found."},
		{"responses: an item not stored", llm.ProtoResponses, 404, openaiStoreFalse, llm.FailRejected,
			"Item with id 'rs_missing' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."},
		{"responses: a conversation", llm.ProtoResponses, 404, openaiConv, llm.FailRejected, "Conversation with id 'conv_probe_does_not_exist' not found."},
		{"responses: a prompt", llm.ProtoResponses, 404, openaiPrompt, llm.FailRejected, "Prompt with id 'pmpt_probe_does_not_exist' not found."},
		{"responses: a tool's model the client named", llm.ProtoResponses, 404, openaiToolModel, llm.FailRejected, "The model `gpt-image-x` does not exist."},
		{"responses: a tool's model the client named, as a 400", llm.ProtoResponses, 400, openaiToolModel, llm.FailRejected, "The model `gpt-image-x` does not exist."},
	}
	for _, tt := range tests {
		pe := StatusError(tt.api, tt.status, nil, []byte(tt.body), time.Now())
		if pe.Class != tt.class || pe.Status != tt.status || pe.Message != tt.msg {
			t.Errorf("%s: class %v, status %d, message %q; want %v, %d, %q", tt.name, pe.Class, pe.Status, pe.Message, tt.class, tt.status, tt.msg)
		}
	}
}

func TestContextError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ContextError("openai", ctx)
	if !errors.Is(err, context.Canceled) || err.Error() != "openai: context canceled" {
		t.Errorf("canceled: %v", err)
	}

	cause := errors.New("client went away")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(cause)
	err = ContextError("anthropic", ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) || err.Error() != "anthropic: context canceled: client went away" {
		t.Errorf("with a cause: %v", err)
	}

	ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if err := ContextError("openai", ctx); !errors.Is(err, context.DeadlineExceeded) || err.Error() != "openai: context deadline exceeded" {
		t.Errorf("deadline (the cause is the error itself, not repeated): %v", err)
	}
}

func TestReadError(t *testing.T) {
	closedErr := fmt.Errorf("openai: stream closed: %w", net.ErrClosed)
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	broken := errors.New("read tcp: connection reset by peer")

	if err := ReadError("openai", ended, true, closedErr, broken); err != closedErr {
		t.Errorf("closed: %v, want the closed error before the context's", err)
	}
	if err := ReadError("openai", ended, false, closedErr, broken); !errors.Is(err, context.Canceled) {
		t.Errorf("context ended: %v", err)
	}
	for _, cut := range []error{io.EOF, io.ErrUnexpectedEOF, fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF)} {
		if err := ReadError("openai", live, false, closedErr, cut); err != llm.ErrStreamCut {
			t.Errorf("%v: %v, want llm.ErrStreamCut", cut, err)
		}
	}
	var pe *llm.ProviderError
	if err := ReadError("openai", live, false, closedErr, sse.ErrEventTooLarge); !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != "upstream event too large" || !errors.Is(err, sse.ErrEventTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if err := ReadError("openai", live, false, closedErr, broken); !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != "upstream connection broken" || !errors.Is(err, broken) {
		t.Errorf("broken: %v", err)
	}
}

// TestRejectedMessage: the envelope's message (OpenAI's, Anthropic's, a
// compatible server's string), else the body as plain text.
func TestRejectedMessage(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"error":{"message":"bad tools","type":"invalid_request_error","param":"tools","code":null}}`, "bad tools"},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}`, "max_tokens: required"},
		{`{"error":{"message":"bad","type":7,"code":400}}`, "bad"},
		{`{"error":"no such thing"}`, "no such thing"},
		{`{"error":{"message":5}}`, `{"error":{"message":5}}`},
		{`{"error":{"message":"  "}}`, `{"error":{"message":"  "}}`},
		{`Bad Request`, "Bad Request"},
		{``, "status 400"},
	} {
		if got := RejectedMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("RejectedMessage(%s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}
