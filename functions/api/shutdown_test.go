package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestSIGTERMFinishesRequestsInFlight: on SIGTERM (what a container
// runtime sends to stop it) the local server stops accepting connections,
// answers the requests it has already taken, and exits with status 0.
func TestSIGTERMFinishesRequestsInFlight(t *testing.T) {
	up := providertest.New(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before up's Close, which waits for its handlers
	up.SetHandler(func(int, providertest.Request) providertest.Response {
		arrived <- struct{}{}
		<-release
		return providertest.Response{Text: []string{"Still", " here"}}
	})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `providers:
  - {name: up, api: openai, base_url: %q}
models:
  - id: m
    routes: [{provider: up, model: up-m, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: sk-shutdown-test}]
`, up.URL()), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "BUZZGATE_CONFIG="+cfg, "BUZZGATE_STORE=")

	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.base+"/api/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`))
		req.Header.Set("Authorization", "Bearer sk-shutdown-test")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{resp.StatusCode, string(b), err}
	}()
	select {
	case <-arrived:
	case r := <-done:
		t.Fatalf("the request ended before reaching the upstream: %+v", r)
	case <-time.After(30 * time.Second):
		t.Fatal("the request did not reach the upstream")
	}
	if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Shutting down, it takes no new connection while the request is
	// still in flight.
	addr := strings.TrimPrefix(g.base, "http://")
	if err := g.WaitReady(10*time.Second, func() error {
		if proc.Accepting(addr)() == nil {
			return fmt.Errorf("%s still accepts connections", addr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("the request in flight ended before its answer: %+v", r)
	default:
	}
	free()
	r := <-done
	var m struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if r.err != nil || r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &m) != nil ||
		len(m.Choices) != 1 || m.Choices[0].Message.Content != "Still here" {
		t.Fatalf("the request in flight at SIGTERM: %d %v %s", r.status, r.err, r.body)
	}
	select {
	case <-g.Exited():
		if err := g.Err(); err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not stop within 30s of its last answer")
	}
}
