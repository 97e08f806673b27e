//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/rie"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestSecretRotationUnderLambda: the bootstrap under the emulator reads the
// providers' keys from a (fake) Secrets Manager at init, signed with its
// environment's credentials, not from its environment; a key rotated in
// the secret is used by the same process, without a restart, once the
// refresh interval has passed; a failed read keeps the key in use.
func TestSecretRotationUnderLambda(t *testing.T) {
	sm := providertest.NewSecretsManager(t)
	sm.Set("buzzgate/providers", `{"ALPHA_API_KEY":"sk-one","KEY_PEPPER":"pepper-from-the-secret"}`)
	up := providertest.New(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `providers:
  - {name: alpha, api: openai, base_url: %q, api_key_env: ALPHA_API_KEY}
models:
  - id: demo/chat
    routes: [{provider: alpha, model: up-1, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: sk-secret-test}]
`, up.URL()), 0o644); err != nil {
		t.Fatal(err)
	}
	emu := startEmulator(t, []string{
		"BUZZGATE_CONFIG=" + cfg,
		"BUZZGATE_SECRET_ID=buzzgate/providers",
		"BUZZGATE_SECRET_REFRESH=300ms",
		"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + sm.URL(),
		"AWS_REGION=" + providertest.BedrockRegion,
		"AWS_ACCESS_KEY_ID=" + providertest.BedrockAccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + providertest.BedrockSecretAccessKey,
		"ALPHA_API_KEY=sk-from-the-environment",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
	})
	raw, err := os.ReadFile(filepath.Join(eventsDir, "chat-completion.json"))
	if err != nil {
		t.Fatal(err)
	}
	event := []byte(strings.ReplaceAll(string(raw), "Bearer sk-demo", "Bearer sk-secret-test"))
	call := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := emu.Invoke(ctx, event)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rie.Decode(out)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v: %+v", err, resp)
		}
		reqs := up.Requests()
		return reqs[len(reqs)-1].Header.Get("Authorization")
	}
	if got := call(); got != "Bearer sk-one" {
		t.Fatalf("first call sent %q, want the secret's key", got)
	}
	sm.Set("buzzgate/providers", `{"ALPHA_API_KEY":"sk-two","KEY_PEPPER":"pepper-from-the-secret"}`)
	rotated := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got := call(); got == "Bearer sk-two" {
			rotated = true
			break
		} else if got != "Bearer sk-one" {
			t.Fatalf("sent %q", got)
		}
	}
	if !rotated {
		t.Fatal("the rotated key was never used")
	}
	sm.FailNext(1000)
	time.Sleep(400 * time.Millisecond)
	for range 3 {
		if got := call(); got != "Bearer sk-two" {
			t.Fatalf("with the secret unreadable: sent %q, want the last good key", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sm.Calls() < 3 {
		t.Errorf("%d reads of the secret", sm.Calls())
	}
}
