package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// startupWarnings starts the gateway from config with env (and the
// secret, when secret is not empty) and returns the warnings it logged.
func startupWarnings(t *testing.T, config string, vars map[string]string, secret string) []map[string]any {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	vars[EnvConfig] = path
	if secret != "" {
		sm := providertest.NewSecretsManager(t)
		sm.Set("buzzgate/providers", secret)
		t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sm.URL())
		t.Setenv("AWS_REGION", providertest.BedrockRegion)
		t.Setenv("AWS_ACCESS_KEY_ID", providertest.BedrockAccessKeyID)
		t.Setenv("AWS_SECRET_ACCESS_KEY", providertest.BedrockSecretAccessKey)
		t.Setenv("AWS_CA_BUNDLE", "")
		vars[EnvSecretID] = "buzzgate/providers"
	}
	var logs bytes.Buffer
	a, err := New(context.Background(), Options{Getenv: env(vars), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil || a.Handler == nil {
		t.Fatalf("a missing provider key must not stop start-up: %v", err)
	}
	var warns []map[string]any
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "WARN" && m["api_key_env"] != nil {
			warns = append(warns, m)
		}
	}
	return warns
}

const keysConfig = `
providers:
  - {name: has-key, api: openai, base_url: "http://127.0.0.1:1/v1", api_key_env: HAS_KEY}
  - {name: unset, api: openai, base_url: "http://127.0.0.1:1/v1", api_key_env: UNSET_KEY}
  - {name: empty, api: anthropic, base_url: "http://127.0.0.1:1", api_key_env: EMPTY_KEY}
  - {name: from-secret, api: openai-responses, base_url: "http://127.0.0.1:1/v1", api_key_env: SECRET_KEY}
  - {name: no-key, api: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  - id: x/y
    routes: [{provider: has-key, model: y}, {provider: unset, model: y}, {provider: empty, model: y}, {provider: from-secret, model: y}, {provider: no-key, model: y}]
`

// TestMissingProviderKeyWarned: each provider whose api_key_env names a
// variable that is unset or empty, and that no provider secret holds, is
// named at start-up with the variable, in a warning; the gateway starts.
// A provider without api_key_env needs no key and is not named.
func TestMissingProviderKeyWarned(t *testing.T) {
	named := func(warns []map[string]any) map[string]string {
		m := map[string]string{}
		for _, w := range warns {
			p, _ := w["provider"].(string)
			m[p], _ = w["api_key_env"].(string)
			if msg, _ := w["msg"].(string); !strings.Contains(msg, p) || !strings.Contains(msg, m[p]) {
				t.Errorf("the warning does not name the provider and the variable: %q", msg)
			}
		}
		return m
	}
	t.Run("environment", func(t *testing.T) {
		warns := startupWarnings(t, keysConfig, map[string]string{"HAS_KEY": "sk-1", "EMPTY_KEY": "", "SECRET_KEY": ""}, "")
		want := map[string]string{"unset": "UNSET_KEY", "empty": "EMPTY_KEY", "from-secret": "SECRET_KEY"}
		if got := named(warns); !maps.Equal(got, want) {
			t.Errorf("warned of %v, want %v", got, want)
		}
	})
	t.Run("secret", func(t *testing.T) {
		warns := startupWarnings(t, keysConfig, map[string]string{"HAS_KEY": "sk-1"}, `{"SECRET_KEY":"sk-from-secret","EMPTY_KEY":""}`)
		want := map[string]string{"unset": "UNSET_KEY", "empty": "EMPTY_KEY"}
		got := named(warns)
		if !maps.Equal(got, want) {
			t.Errorf("warned of %v, want %v", got, want)
		}
		for _, w := range warns {
			if msg, _ := w["msg"].(string); !strings.Contains(msg, EnvSecretID) {
				t.Errorf("with a secret, the warning does not say where else it looked: %q", msg)
			}
		}
	})
}
