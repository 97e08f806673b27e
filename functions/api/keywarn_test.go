package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBinaryWarnsOfMissingKey: the local server started with a provider
// whose api_key_env is unset logs a warning at start-up naming the
// provider and the variable, and serves all the same.
func TestBinaryWarnsOfMissingKey(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte(`
providers:
  - {name: upstream, api: openai, base_url: "http://127.0.0.1:1/v1", api_key_env: BUZZGATE_TEST_MISSING_KEY}
models:
  - id: x/y
    routes: [{provider: upstream, model: y, input_price: 1, output_price: 1}]
projects:
  - id: p
    keys: [{key: sk-test-keywarn}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "BUZZGATE_CONFIG="+config, "BUZZGATE_STORE=", "BUZZGATE_TEST_MISSING_KEY=")
	// It serves; stopped with SIGTERM, it writes out every log line.
	req, _ := http.NewRequest(http.MethodGet, g.base+"/api/v1/models", nil)
	req.Header.Set("Authorization", "Bearer sk-test-keywarn")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /api/v1/models: %d", resp.StatusCode)
	}
	g.Stop(30 * time.Second)
	var found bool
	for line := range strings.Lines(g.logs.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		msg, _ := m["msg"].(string)
		if m["level"] == "WARN" && m["provider"] == "upstream" && m["api_key_env"] == "BUZZGATE_TEST_MISSING_KEY" &&
			strings.Contains(msg, "upstream") && strings.Contains(msg, "BUZZGATE_TEST_MISSING_KEY") {
			found = true
		}
	}
	if !found {
		t.Errorf("no start-up warning naming the provider and its variable:\n%s", g.logs.String())
	}
}
