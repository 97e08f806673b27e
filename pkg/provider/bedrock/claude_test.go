package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

const claudeModel = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

// fake starts a fake Bedrock Runtime and a Runtime client signed with its
// credentials (or with creds, when given).
func fake(t *testing.T, creds aws.CredentialsProvider) (*providertest.Server, ClaudeTransport) {
	t.Helper()
	up := providertest.NewBedrock(t)
	if creds == nil {
		creds = credentials.NewStaticCredentialsProvider(providertest.BedrockAccessKeyID, providertest.BedrockSecretAccessKey, "")
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithCredentialsProvider(creds))
	if err != nil {
		t.Fatal(err)
	}
	return up, ClaudeTransport{Runtime: NewRuntime(cfg, providertest.BedrockRegion, up.URL(), nil)}
}

// messagesCall is the call an anthropic adapter makes.
func messagesCall(t *testing.T, body string, beta ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ClaudeEndpoint+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Anthropic-Version", "2023-06-01")
	for _, b := range beta {
		req.Header.Add("Anthropic-Beta", b)
	}
	return req
}

func TestIsClaude(t *testing.T) {
	for model, want := range map[string]bool{
		"anthropic.claude-3-5-haiku-20241022-v1:0":                                                  true,
		"us.anthropic.claude-sonnet-4-5-20250929-v1:0":                                              true,
		"global.anthropic.claude-opus-4-1-20250805-v1:0":                                            true,
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-haiku-4-5-v1": true,
		"arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0":        true,
		"amazon.nova-pro-v1:0":               false,
		"us.meta.llama3-3-70b-instruct-v1:0": false,
		"mistral.mistral-large-2407-v1:0":    false,
		"deepseek.r1-v1:0":                   false,
	} {
		if got := IsClaude(model); got != want {
			t.Errorf("IsClaude(%q) = %v", model, got)
		}
	}
}

// TestClaudeTransport: a Messages call becomes a signed
// InvokeModelWithResponseStream of the body's model, with the body less
// model and stream, plus anthropic_version and the betas; the answer is the
// Anthropic events as an SSE stream, byte for byte.
func TestClaudeTransport(t *testing.T) {
	up, tr := fake(t, nil)
	up.Script(providertest.Response{Text: []string{"Hello", " world"}, Usage: &providertest.Usage{PromptTokens: 12, CompletionTokens: 3}})
	body := `{"model":"` + claudeModel + `","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello"}],"thinking":{"type":"enabled","budget_tokens":1024}}`
	resp, err := tr.RoundTrip(messagesCall(t, body, "interleaved-thinking-2025-05-14", "context-1m-2025-08-07,fine-grained-tool-streaming-2025-05-14"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := sse.NewReader(resp.Body, 1<<20)
	var names []string
	var text strings.Builder
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var data struct {
			Type  string `json:"type"`
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &data); err != nil || data.Type != ev.Event {
			t.Errorf("event %q: data %s (%v)", ev.Event, ev.Data, err)
		}
		names = append(names, ev.Event)
		text.WriteString(data.Delta.Text)
	}
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want || text.String() != "Hello world" {
		t.Errorf("events %s, text %q; want %s", got, text.String(), want)
	}
	reqs := up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d calls", len(reqs))
	}
	if want := "/model/" + claudeModel + providertest.BedrockStreamSuffix; reqs[0].Path != want {
		t.Errorf("path %q, want %q", reqs[0].Path, want)
	}
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(reqs[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if _, ok := sent["model"]; ok {
		t.Errorf("the body still names the model: %s", reqs[0].Body)
	}
	if _, ok := sent["stream"]; ok {
		t.Errorf("the body still has stream: %s", reqs[0].Body)
	}
	if string(sent["anthropic_version"]) != `"bedrock-2023-05-31"` ||
		string(sent["anthropic_beta"]) != `["interleaved-thinking-2025-05-14","context-1m-2025-08-07","fine-grained-tool-streaming-2025-05-14"]` ||
		string(sent["thinking"]) != `{"type":"enabled","budget_tokens":1024}` {
		t.Errorf("body %s", reqs[0].Body)
	}
}

// TestClaudeTransportFailures: Bedrock's errors become the statuses the
// anthropic adapter classifies, in Anthropic's envelope; an exception in
// the stream an error event; a request signed with other credentials is
// refused by Bedrock (a 403).
func TestClaudeTransportFailures(t *testing.T) {
	body := `{"model":"` + claudeModel + `","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`
	for _, c := range []struct {
		status       int
		wantStatus   int
		wantType     string
		wantContains string
	}{
		{429, 429, "rate_limit_error", "ThrottlingException"},
		{400, 400, "invalid_request_error", "scripted 400"},
		{403, 403, "permission_error", "AccessDeniedException"},
		{404, 404, "not_found_error", "ResourceNotFoundException"},
		{503, 503, "overloaded_error", "ServiceUnavailableException"},
		{500, 500, "api_error", "InternalServerException"},
	} {
		up, tr := fake(t, nil)
		up.Script(providertest.Response{Status: c.status})
		resp, err := tr.RoundTrip(messagesCall(t, body))
		if err != nil {
			t.Fatalf("%d: %v", c.status, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var env struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if json.Unmarshal(b, &env) != nil || resp.StatusCode != c.wantStatus || env.Type != "error" || env.Error.Type != c.wantType || !strings.Contains(env.Error.Message, c.wantContains) {
			t.Errorf("Bedrock %d: %d %s; want %d %s containing %q", c.status, resp.StatusCode, b, c.wantStatus, c.wantType, c.wantContains)
		}
		if up.Calls() != 1 {
			t.Errorf("Bedrock %d: %d calls, want 1 (the SDK's retries are off)", c.status, up.Calls())
		}
	}

	up, tr := fake(t, nil)
	up.Script(providertest.Response{Text: []string{"a", "b"}, Cut: &providertest.Cut{After: 1, How: providertest.CutError}})
	resp, err := tr.RoundTrip(messagesCall(t, body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "event: content_block_delta\n") || !strings.HasSuffix(string(b), "event: error\ndata: {\"error\":{\"message\":\"ModelStreamErrorException: scripted mid-stream error\",\"type\":\"api_error\"},\"type\":\"error\"}\n\n") {
		t.Errorf("a stream with an exception:\n%s", b)
	}

	// A call other than a generation is never sent as one.
	up, tr = fake(t, nil)
	count := messagesCall(t, body)
	count.URL.Path = "/v1/messages/count_tokens"
	resp, err = tr.RoundTrip(count)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || up.Calls() != 0 {
		t.Errorf("count_tokens: %d, %d Bedrock calls; want 404 and none", resp.StatusCode, up.Calls())
	}

	up, tr = fake(t, credentials.NewStaticCredentialsProvider(providertest.BedrockAccessKeyID, "not-the-secret", ""))
	resp, err = tr.RoundTrip(messagesCall(t, body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "InvalidSignatureException") || up.Calls() != 0 {
		t.Errorf("a wrong signature: %d %s, %d calls", resp.StatusCode, b, up.Calls())
	}
}

// TestStatus: each Bedrock error the issue names gets the status (and so
// the fallback class) it stands for; a failure without an answer none.
func TestStatus(t *testing.T) {
	for code, want := range map[string]int{
		"ThrottlingException":           429,
		"ServiceQuotaExceededException": 429,
		"ValidationException":           400,
		"AccessDeniedException":         403,
		"UnrecognizedClientException":   403,
		"ExpiredTokenException":         403,
		"ResourceNotFoundException":     404,
		"ModelNotReadyException":        503,
		"ServiceUnavailableException":   503,
		"ModelTimeoutException":         504,
		"InternalServerException":       500,
		"ModelErrorException":           500,
	} {
		got, _, msg := Status(&smithy.GenericAPIError{Code: code, Message: "m"})
		if got != want || !strings.Contains(msg, "m") {
			t.Errorf("%s: %d %q, want %d", code, got, msg, want)
		}
	}
	if got, _, _ := Status(errors.New("dial tcp: connection refused")); got != 0 {
		t.Errorf("a connection failure: %d, want 0", got)
	}
	// The class a Converse call's failure gets from that status.
	for code, want := range map[string]llm.FailureClass{
		"ThrottlingException": llm.FailThrottled, "ValidationException": llm.FailRejected,
		"AccessDeniedException": llm.FailConfig, "ResourceNotFoundException": llm.FailConfig,
		"ModelNotReadyException": llm.FailTransient, "InternalServerException": llm.FailTransient,
	} {
		var pe *llm.ProviderError
		if err := classify(context.Background(), &smithy.GenericAPIError{Code: code}); !errors.As(err, &pe) || pe.Class != want {
			t.Errorf("%s: %v, want class %v", code, err, want)
		}
	}
}
