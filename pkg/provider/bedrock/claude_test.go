package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/providertest"
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

// messagesCall is the call an anthropic adapter makes, its body in two
// pieces.
func messagesCall(body string, beta ...string) upstream.Call {
	h := http.Header{}
	h.Set("Anthropic-Version", "2023-06-01")
	for _, b := range beta {
		h.Add("Anthropic-Beta", b)
	}
	half := len(body) / 2
	return upstream.Call{Model: claudeModel, Body: [][]byte{[]byte(body[:half]), []byte(body[half:])}, Header: h}
}

// readEvents reads events to their end: the events' names and data, and
// the error that ended them (io.EOF for a clean end).
func readEvents(t *testing.T, evs upstream.Events) (names []string, data [][]byte, err error) {
	t.Helper()
	defer evs.Close()
	for {
		ev, err := evs.Next()
		if err != nil {
			return names, data, err
		}
		if ev.Whole {
			t.Errorf("a whole answer: %s", ev.Data)
		}
		names, data = append(names, ev.Name), append(data, ev.Data)
	}
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
// InvokeModelWithResponseStream of the call's model, with the body less
// model and stream, plus anthropic_version and the betas; the answer is
// the Anthropic events, each named by its type, byte for byte.
func TestClaudeTransport(t *testing.T) {
	up, tr := fake(t, nil)
	up.Script(providertest.Response{Text: []string{"Hello", " world"}, Usage: &providertest.Usage{PromptTokens: 12, CompletionTokens: 3}})
	body := `{"model":"` + claudeModel + `","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello"}],"thinking":{"type":"enabled","budget_tokens":1024}}`
	evs, err := tr.Open(t.Context(), messagesCall(body, "interleaved-thinking-2025-05-14", "context-1m-2025-08-07,fine-grained-tool-streaming-2025-05-14"))
	if err != nil {
		t.Fatal(err)
	}
	names, data, err := readEvents(t, evs)
	if err != io.EOF {
		t.Errorf("the events ended with %v, want io.EOF", err)
	}
	var text strings.Builder
	for i, d := range data {
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(d, &ev); err != nil || ev.Type != names[i] {
			t.Errorf("event %q: data %s (%v)", names[i], d, err)
		}
		text.WriteString(ev.Delta.Text)
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

// TestClaudeTransportFailures: Bedrock's errors are classified by their
// exception, with the status that stands for it and Bedrock's words; an
// exception in the stream ends the events with an Anthropic error event's
// error; a request signed with other credentials is refused by Bedrock (a
// 403).
func TestClaudeTransportFailures(t *testing.T) {
	body := `{"model":"` + claudeModel + `","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`
	for _, c := range []struct {
		status       int
		wantStatus   int
		wantClass    llm.FailureClass
		wantContains string
	}{
		{429, 429, llm.FailThrottled, "ThrottlingException"},
		{400, 400, llm.FailRejected, "scripted 400"},
		{403, 403, llm.FailConfig, "AccessDeniedException"},
		{404, 404, llm.FailConfig, "ResourceNotFoundException"},
		{503, 503, llm.FailTransient, "ServiceUnavailableException"},
		{500, 500, llm.FailTransient, "InternalServerException"},
	} {
		up, tr := fake(t, nil)
		up.Script(providertest.Response{Status: c.status})
		evs, err := tr.Open(t.Context(), messagesCall(body))
		var pe *llm.ProviderError
		if evs != nil || !errors.As(err, &pe) || pe.Status != c.wantStatus || pe.Class != c.wantClass || !strings.Contains(pe.Message, c.wantContains) {
			t.Errorf("Bedrock %d: %v; want status %d, class %v, containing %q", c.status, err, c.wantStatus, c.wantClass, c.wantContains)
		}
		if up.Calls() != 1 {
			t.Errorf("Bedrock %d: %d calls, want 1 (the SDK's retries are off)", c.status, up.Calls())
		}
	}

	up, tr := fake(t, nil)
	up.Script(providertest.Response{Text: []string{"a", "b"}, Cut: &providertest.Cut{After: 1, How: providertest.CutError}})
	evs, err := tr.Open(t.Context(), messagesCall(body))
	if err != nil {
		t.Fatal(err)
	}
	names, _, err := readEvents(t, evs)
	var pe *llm.ProviderError
	var ce *llm.ChunkError
	const msg = "ModelStreamErrorException: scripted mid-stream error"
	if !slices.Contains(names, "content_block_delta") || !errors.As(err, &pe) || pe.Class != llm.FailTransient || pe.Message != msg ||
		!errors.As(err, &ce) || ce.Message != msg {
		t.Errorf("a stream with an exception: events %q, then %v", names, err)
	}

	// The adapter over Bedrock counts no tokens: nothing is sent.
	up, tr = fake(t, nil)
	if _, err := anthropic.NewOver("aws", tr).CountTokens(t.Context(), &llm.TokenCountRequest{Model: claudeModel, Body: []byte(body)}); err == nil || up.Calls() != 0 {
		t.Errorf("count_tokens: %v, %d Bedrock calls; want an error and none", err, up.Calls())
	}

	up, tr = fake(t, credentials.NewStaticCredentialsProvider(providertest.BedrockAccessKeyID, "not-the-secret", ""))
	evs, err = tr.Open(t.Context(), messagesCall(body))
	if evs != nil || !errors.As(err, &pe) || pe.Status != 403 || pe.Class != llm.FailConfig || !strings.Contains(pe.Message, "InvalidSignatureException") || up.Calls() != 0 {
		t.Errorf("a wrong signature: %v, %d calls", err, up.Calls())
	}

	// Refused without a call.
	for name, call := range map[string]upstream.Call{
		"no model": {Body: [][]byte{[]byte(body)}},
		"no JSON":  {Model: claudeModel, Body: [][]byte{[]byte("[1]")}},
	} {
		up, tr = fake(t, nil)
		evs, err = tr.Open(t.Context(), call)
		if evs != nil || !errors.As(err, &pe) || pe.Class != llm.FailRejected || up.Calls() != 0 {
			t.Errorf("%s: %v, %d calls; want FailRejected and none", name, err, up.Calls())
		}
	}
}

// TestClaudeEventsEnd: the events of a call whose context ends, or that is
// closed, stop without waiting for Bedrock; a context that ended before the
// call makes none.
func TestClaudeEventsEnd(t *testing.T) {
	body := `{"model":"` + claudeModel + `","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`
	up, tr := fake(t, nil)
	up.Script(providertest.Response{Text: []string{"a", "b"}, FirstChunkDelay: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	evs, err := tr.Open(ctx, messagesCall(body))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, _, err := readEvents(t, evs); !errors.Is(err, context.Canceled) {
		t.Errorf("a context ended: %v, want context.Canceled", err)
	}
	up.Script(providertest.Response{Text: []string{"a", "b"}, FirstChunkDelay: time.Hour})
	evs, err = tr.Open(t.Context(), messagesCall(body))
	if err != nil {
		t.Fatal(err)
	}
	go evs.Close()
	if names, _, err := readEvents(t, evs); err != io.EOF || slices.Contains(names, "content_block_delta") {
		t.Errorf("closed: events %q, then %v; want them to end (io.EOF) before any content", names, err)
	}
	if _, err := tr.Open(ctx, messagesCall(body)); !errors.Is(err, context.Canceled) || up.Calls() != 2 {
		t.Errorf("a call with its context ended: %v, %d calls; want context.Canceled and no new call", err, up.Calls())
	}
}

// TestOverlappingStreams: two streams open at once on one client are read
// whole, each its own answer. The SDK's client shares one event-stream
// decoder among its calls unless a call brings its own (ownStream); under
// the race detector (make test) sharing it fails this test.
func TestOverlappingStreams(t *testing.T) {
	body := `{"model":"` + claudeModel + `","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`
	up, tr := fake(t, nil)
	up.Script(providertest.Response{Text: []string{"one ", "two ", "three"}},
		providertest.Response{Text: []string{"four ", "five ", "six"}})
	first, err := tr.Open(t.Context(), messagesCall(body))
	if err != nil {
		t.Fatal(err)
	}
	second, err := tr.Open(t.Context(), messagesCall(body))
	if err != nil {
		t.Fatal(err)
	}
	for i, evs := range []upstream.Events{first, second} {
		names, data, err := readEvents(t, evs)
		if err != io.EOF {
			t.Errorf("stream %d ended with %v, want io.EOF", i, err)
		}
		var deltas int
		for j, name := range names {
			if name == "content_block_delta" {
				deltas++
				if !bytes.Contains(data[j], []byte(`"text_delta"`)) {
					t.Errorf("stream %d: delta %s", i, data[j])
				}
			}
		}
		if deltas != 3 || names[len(names)-1] != "message_stop" {
			t.Errorf("stream %d: events %q, want 3 text deltas and message_stop last", i, names)
		}
	}
}
