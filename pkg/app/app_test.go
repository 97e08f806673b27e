package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestNewDemoConfig(t *testing.T) {
	a, err := New(context.Background(), Options{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Config.Model("demo/chat"); !ok {
		t.Fatal("the demo config has no demo/chat")
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/chat/completions", strings.NewReader(`{"model":"demo/chat","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-demo")
	w := httptest.NewRecorder()
	a.Handler.ServeHTTP(w, req)
	if w.Code != 200 || w.Header().Get("X-Gateway-Provider") != "alpha" {
		t.Errorf("demo request: %d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestNewConfigFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(`
providers:
  - {name: up, api: openai, base_url: "http://127.0.0.1:1/v1", api_key_env: UP_KEY}
models:
  - id: x/y
    routes: [{provider: up, model: y}]
`), 0o600)
	a, err := New(context.Background(), Options{Getenv: env(map[string]string{EnvConfig: good})})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Config.Model("x/y"); !ok {
		t.Error("model x/y not loaded from the file")
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`
providers:
  - {name: up, api: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  - id: x/y
    routes: [{provider: nope, model: y}]
`), 0o600)
	_, err = New(context.Background(), Options{Getenv: env(map[string]string{EnvConfig: bad})})
	if err == nil || !strings.Contains(err.Error(), "models[0].routes[0].provider") {
		t.Errorf("bad config: err = %v, want one naming models[0].routes[0].provider", err)
	}
	_, err = New(context.Background(), Options{Getenv: env(map[string]string{EnvConfig: filepath.Join(dir, "missing.yaml")})})
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing config: err = %v", err)
	}
}

func TestNewStore(t *testing.T) {
	if _, err := New(context.Background(), Options{Getenv: env(map[string]string{EnvStore: "redis"})}); err == nil || !strings.Contains(err.Error(), EnvStore) {
		t.Errorf("unknown store: err = %v", err)
	}
}

// TestOpenAIResponsesProvider: an api: openai-responses provider is built
// with its key, and a Chat Completions request reaches it as a Responses
// request, its answer back as a chat completion.
func TestOpenAIResponsesProvider(t *testing.T) {
	up := providertest.NewResponses(t)
	up.SetDefault(providertest.Response{Text: []string{"Hi", " there"}})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(`
providers:
  - {name: resp, api: openai-responses, base_url: "`+up.URL()+`", api_key_env: RESP_KEY}
models:
  - id: x/y
    routes: [{provider: resp, model: y-upstream}]
projects:
  - id: p
    balance: 10
    keys: [{key: sk-test-responses-0123456789}]
`), 0o600)
	a, err := New(context.Background(), Options{Getenv: env(map[string]string{EnvConfig: cfg, "RESP_KEY": "sk-upstream"})})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/chat/completions", strings.NewReader(`{"model":"x/y","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-test-responses-0123456789")
	w := httptest.NewRecorder()
	a.Handler.ServeHTTP(w, req)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"content":"Hi there"`) {
		t.Fatalf("status %d, body %s", w.Code, w.Body)
	}
	reqs := up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the upstream received %d requests, want 1", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-upstream" {
		t.Errorf("Authorization %q, want the key from RESP_KEY", got)
	}
	if reqs[0].JSON["model"] != "y-upstream" || reqs[0].JSON["input"] == nil || reqs[0].JSON["store"] != false {
		t.Errorf("the upstream received %s, want a Responses request for y-upstream", reqs[0].Body)
	}
}

// TestSecretPepper: with BUZZGATE_SECRET_ID, the pepper comes from the
// secret's KEY_PEPPER (not BUZZGATE_KEY_PEPPER): a config key's id is
// derived with it.
func TestSecretPepper(t *testing.T) {
	sm := providertest.NewSecretsManager(t)
	sm.Set("buzzgate/providers", `{"KEY_PEPPER":"pepper-from-the-secret"}`)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sm.URL())
	t.Setenv("AWS_REGION", providertest.BedrockRegion)
	t.Setenv("AWS_ACCESS_KEY_ID", providertest.BedrockAccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", providertest.BedrockSecretAccessKey)
	t.Setenv("AWS_CA_BUNDLE", "")
	a, err := New(context.Background(), Options{Getenv: env(map[string]string{
		EnvSecretID: "buzzgate/providers", EnvKeyPepper: "pepper-from-the-environment"})})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/chat/completions", strings.NewReader(`{"model":"demo/chat","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-demo")
	w := httptest.NewRecorder()
	a.Handler.ServeHTTP(w, req)
	if err := a.Finisher.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	req = httptest.NewRequest(http.MethodGet, "/api/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer sk-demo")
	w = httptest.NewRecorder()
	a.Handler.ServeHTTP(w, req)
	want := billing.ConfigKeyID([]byte("pepper-from-the-secret"), "sk-demo")
	if w.Code != 200 || !strings.Contains(w.Body.String(), want) || sm.Calls() != 1 {
		t.Errorf("usage %d %s; want the key id %s (the secret's pepper), %d reads", w.Code, w.Body, want, sm.Calls())
	}
	if _, err := New(context.Background(), Options{Getenv: env(map[string]string{EnvSecretID: "missing"})}); err == nil ||
		!strings.Contains(err.Error(), `BUZZGATE_SECRET_ID="missing": secret missing:`) {
		t.Errorf("a missing secret: %v", err)
	}
	if _, err := New(context.Background(), Options{Getenv: env(map[string]string{EnvSecretID: "x", EnvSecretRefresh: "soon"})}); err == nil ||
		!strings.Contains(err.Error(), `BUZZGATE_SECRET_REFRESH="soon"`) {
		t.Errorf("a bad refresh: %v", err)
	}
}
