package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/lambdaedge"
)

// The emulator buffers a streamed response, so these tests check that the
// gateway's answers really stream: through lambdaedge.Wrap in process, and
// through the local server.

// slowWords and slowChunk make a simulated answer last about a second.
const (
	slowWords = 6
	slowChunk = 150 * time.Millisecond
)

// arrival is one SSE event and when it was read.
type arrival struct {
	data string
	at   time.Duration
}

// readEvents reads SSE events as they arrive, timed from start.
func readEvents(t *testing.T, r io.Reader, start time.Time) []arrival {
	t.Helper()
	var out []arrival
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, arrival{data: data, at: time.Since(start)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	return out
}

// checkIncremental: the first event came well before the last ([DONE]).
func checkIncremental(t *testing.T, got []arrival) {
	t.Helper()
	if len(got) < slowWords || got[len(got)-1].data != "[DONE]" {
		t.Fatalf("stream %v", got)
	}
	first, last := got[0].at, got[len(got)-1].at
	if last-first < time.Duration(slowWords-2)*slowChunk {
		t.Errorf("the events arrived together (first at %v, last at %v): the answer was buffered", first, last)
	}
}

// TestStreamsThroughWrap runs the gateway's handler behind lambdaedge.Wrap
// in process, with a slow simulated provider, and reads the body as the
// runtime would: the events arrive as they are produced.
func TestStreamsThroughWrap(t *testing.T) {
	cfg := catalog.Demo()
	for i := range cfg.Providers {
		cfg.Providers[i].Simulated.ChunkLatency = catalog.Duration(slowChunk)
		cfg.Providers[i].Simulated.Words = slowWords
	}
	a, err := app.FromConfig(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(eventsDir, "chat-completion-stream.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := lambdaedge.Wrap(a.Handler)(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("head %d %v", resp.StatusCode, resp.Headers)
	}
	checkIncremental(t, readEvents(t, resp.Body, start))
}

// TestStreamsLocally: the same through the binary serving HTTP. Its
// upstream sends a first chunk and then holds the rest of the answer back
// until the client has read a first event: were the answer buffered, the
// upstream would end only at its 20 s cap, and the test fails.
func TestStreamsLocally(t *testing.T) {
	gate := make(chan struct{})
	var buffered atomic.Bool // the upstream ended before the client read anything
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		send := func(data string) {
			io.WriteString(w, "data: "+data+"\n\n")
			rc.Flush()
		}
		chunk := func(delta, finish string) string {
			return `{"id":"chatcmpl-gate","object":"chat.completion.chunk","created":1700000000,"model":"up-m",` +
				`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
		}
		send(chunk(`{"role":"assistant","content":""}`, "null"))
		send(chunk(`{"content":"Hello"}`, "null"))
		select {
		case <-gate:
		case <-time.After(20 * time.Second):
			buffered.Store(true)
		case <-r.Context().Done():
			return
		}
		send(chunk(`{"content":" world"}`, "null"))
		send(chunk(`{}`, `"stop"`))
		send("[DONE]")
	}))
	t.Cleanup(up.Close) // after the gateway is stopped (cleanups run last first)

	config := filepath.Join(t.TempDir(), "gated.yaml")
	yaml := `
providers:
  - {name: up, api: openai, base_url: "` + up.URL + `/v1"}
models:
  - id: demo/gated
    routes:
      - {provider: up, model: up-m, input_price: 0.1, output_price: 0.1}
projects:
  - id: demo
    keys:
      - key: sk-demo
`
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startGateway(t, "BUZZGATE_CONFIG="+config, "BUZZGATE_STORE=").base

	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/chat/completions",
		strings.NewReader(`{"model":"demo/gated","stream":true,"messages":[{"role":"user","content":"Hello"}]}`))
	req.Header.Set("Authorization", "Bearer sk-demo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if len(got) == 0 {
				close(gate) // a first event is here: let the upstream finish
			}
			got = append(got, data)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	if len(got) < 3 || got[len(got)-1] != "[DONE]" || !strings.Contains(strings.Join(got, ""), " world") {
		t.Fatalf("stream %q", got)
	}
	if buffered.Load() {
		t.Errorf("no event reached the client before the upstream ended: the answer was buffered")
	}
}
