//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/rie"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestBedrockUnderLambda: the bootstrap under the emulator serves a
// Messages request on a Bedrock Claude route with the credentials of its
// environment (as Lambda gives a function its role's): the fake Bedrock
// Runtime checks the call's SigV4 signature and answers, and the client
// gets the Anthropic events Bedrock wrapped.
func TestBedrockUnderLambda(t *testing.T) {
	up := providertest.NewBedrock(t)
	up.Script(providertest.Response{Text: []string{"From", " Bedrock"}})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `providers:
  - {name: aws, api: bedrock, aws_region: %s, base_url: %q}
models:
  - id: m
    routes: [{provider: aws, model: us.anthropic.claude-x-v1:0, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: sk-bedrock-test}]
`, providertest.BedrockRegion, up.URL()), 0o644); err != nil {
		t.Fatal(err)
	}
	emu := startEmulator(t, []string{
		"BUZZGATE_CONFIG=" + cfg,
		"AWS_REGION=" + providertest.BedrockRegion,
		"AWS_ACCESS_KEY_ID=" + providertest.BedrockAccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + providertest.BedrockSecretAccessKey,
		"AWS_SESSION_TOKEN=",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
	})
	raw, err := os.ReadFile(filepath.Join(eventsDir, "chat-completion.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev["path"] = "/api/v1/messages"
	ev["pathParameters"] = map[string]any{"proxy": "api/v1/messages"}
	ev["body"] = `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	headers := ev["headers"].(map[string]any)
	multi := ev["multiValueHeaders"].(map[string]any)
	for k, v := range map[string]string{"Authorization": "Bearer sk-bedrock-test", "anthropic-version": "2023-06-01", "Accept": "text/event-stream"} {
		headers[k], multi[k] = v, []any{v}
	}
	event, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := emu.Invoke(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rie.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	body := string(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Provider") != "aws" || !strings.Contains(body, "event: message_start") ||
		!strings.Contains(body, `"text":" Bedrock"`) || !strings.Contains(body, "event: message_stop") {
		t.Errorf("status %d, headers %v:\n%s", resp.StatusCode, resp.Header, body)
	}
	if up.Calls() != 1 || up.Requests()[0].Path != "/model/us.anthropic.claude-x-v1:0"+providertest.BedrockStreamSuffix {
		t.Errorf("%d Bedrock calls: %v", up.Calls(), up.Requests())
	}
}
