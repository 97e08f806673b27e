//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/internal/rie"
)

// dyn is the dynalite server the Lambda tests share.
var dyn dynalite.Shared

func init() {
	afterTests = append(afterTests, func(code int) {
		if out := dyn.Output(); code != 0 && out != "" {
			fmt.Fprintf(os.Stderr, "dynalite's output:\n%s\n", out)
		}
		dyn.Close()
	})
}

var requestID = regexp.MustCompile(`^req_[0-9a-f]{16,}$`)

// newTable creates a fresh idempotency table on the package's dynalite, as
// the SAM template does in AWS: under Lambda the gateway does not create it.
func newTable(t *testing.T) (endpoint, table string) {
	t.Helper()
	endpoint = dyn.Endpoint(t)
	return endpoint, dynalite.Table(t, dynalite.Client(t, endpoint), "lambda")
}

// startFunction runs the gateway's bootstrap under the emulator with the
// DynamoDB store on dynalite and the embedded demo config.
func startFunction(t *testing.T, endpoint, table string) *rie.Emulator {
	t.Helper()
	return startEmulator(t, []string{
		"BUZZGATE_STORE=dynamodb",
		"BUZZGATE_TABLE=" + table,
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=x",
		"AWS_SECRET_ACCESS_KEY=x",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
	})
}

// startEmulator runs the bootstrap under the emulator with env, and stops
// it when the test ends, failing the test if the function raced.
func startEmulator(t *testing.T, env []string) *rie.Emulator {
	t.Helper()
	emu, err := rie.Start(rie.Options{Bootstrap: bootstrap(t), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		emu.Close()
		out := emu.Output()
		if strings.Contains(out, "DATA RACE") {
			t.Errorf("the function raced:\n%s", out)
		} else if t.Failed() {
			t.Logf("emulator and function output:\n%s", out)
		}
	})
	return emu
}

// invokeEvent sends events/<name> and decodes the streamed response.
func invokeEvent(t *testing.T, emu *rie.Emulator, name string) *rie.Response {
	t.Helper()
	ev, err := os.ReadFile(filepath.Join(eventsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := emu.Invoke(ctx, ev)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	resp, err := rie.Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return resp
}

// errorCode is the OpenAI error envelope's code and type; param must be
// present (null or a string).
func errorCode(t *testing.T, body []byte) (code, typ string) {
	t.Helper()
	var env struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
		t.Fatalf("not an error envelope: %q", body)
	}
	if _, ok := env.Error["param"]; !ok {
		t.Errorf("error envelope without param: %s", body)
	}
	json.Unmarshal(env.Error["code"], &code)
	json.Unmarshal(env.Error["type"], &typ)
	return code, typ
}

// checkAnswer: an answer from a provider, not replayed.
func checkAnswer(t *testing.T, r *rie.Response, contentType, provider, depth string) {
	t.Helper()
	if r.StatusCode != 200 {
		t.Fatalf("status %d: %s", r.StatusCode, r.Body)
	}
	h := r.Header
	if !strings.HasPrefix(h.Get("Content-Type"), contentType) || h.Get("X-Gateway-Provider") != provider ||
		h.Get("X-Gateway-Route-Depth") != depth || !requestID.MatchString(h.Get("X-Request-Id")) {
		t.Errorf("headers %v, want %s from %s at depth %s with a request id", h, contentType, provider, depth)
	}
	if h.Get("Idempotency-Replayed") != "" {
		t.Errorf("Idempotency-Replayed on a first answer: %v", h)
	}
}

func checkCompletion(t *testing.T, body []byte) {
	t.Helper()
	var c struct {
		Object string `json:"object"`
		Usage  struct {
			Cost float64 `json:"cost"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil || c.Object != "chat.completion" || c.Usage.Cost <= 0 {
		t.Errorf("not a chat completion with a cost: %s", body)
	}
}

type eventTest struct {
	event string // a file in events/
	check func(t *testing.T, r *rie.Response)
}

// TestEvents invokes every sample event through the emulator against
// DynamoDB (dynalite), in an order that makes the keyed ones meaningful:
// the first keyed call runs, the same call again is a replay, another body
// under the key is a conflict.
func TestEvents(t *testing.T) {
	endpoint, table := newTable(t)
	emu := startFunction(t, endpoint, table)
	for _, tt := range eventTests(t) {
		t.Run(tt.event, func(t *testing.T) {
			r := invokeEvent(t, emu, tt.event)
			tt.check(t, r)
		})
	}
}

// eventTests are the answers events/README.md promises, one check per
// sample event, in the order to send them; the replay compares with the
// keyed event's answer, so they share state. It fails t when an event in
// events/ has no check.
func eventTests(t *testing.T) []eventTest {
	t.Helper()
	var first *rie.Response // chat-completion-keyed.json's answer
	tests := []eventTest{
		{"models.json", func(t *testing.T, r *rie.Response) {
			if r.StatusCode != 200 || !requestID.MatchString(r.Header.Get("X-Request-Id")) {
				t.Fatalf("%d %v", r.StatusCode, r.Header)
			}
			var list struct {
				Object string `json:"object"`
				Data   []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			json.Unmarshal(r.Body, &list)
			var ids []string
			for _, m := range list.Data {
				ids = append(ids, m.ID)
			}
			if list.Object != "list" || !slices.Contains(ids, "demo/chat") || !slices.Contains(ids, "demo/fallback") {
				t.Errorf("models %s", r.Body)
			}
		}},
		{"chat-completion.json", func(t *testing.T, r *rie.Response) {
			checkAnswer(t, r, "application/json", "alpha", "0")
			checkCompletion(t, r.Body)
		}},
		{"chat-completion-fallback.json", func(t *testing.T, r *rie.Response) {
			checkAnswer(t, r, "application/json", "alpha", "1")
			checkCompletion(t, r.Body)
		}},
		{"chat-completion-stream.json", func(t *testing.T, r *rie.Response) {
			checkAnswer(t, r, "text/event-stream", "alpha", "0")
			checkStream(t, r.Body)
		}},
		{"chat-completion-bad-key.json", func(t *testing.T, r *rie.Response) {
			if r.StatusCode != 401 || !requestID.MatchString(r.Header.Get("X-Request-Id")) || r.Header.Get("X-Gateway-Provider") != "" {
				t.Fatalf("%d %v %s", r.StatusCode, r.Header, r.Body)
			}
			if code, _ := errorCode(t, r.Body); code != "invalid_api_key" {
				t.Errorf("code %q", code)
			}
		}},
		{"chat-completion-keyed.json", func(t *testing.T, r *rie.Response) {
			checkAnswer(t, r, "application/json", "alpha", "0")
			checkCompletion(t, r.Body)
			first = r
		}},
		{"chat-completion-keyed-replay.json", func(t *testing.T, r *rie.Response) {
			checkReplay(t, first, r)
		}},
		{"chat-completion-keyed-conflict.json", func(t *testing.T, r *rie.Response) {
			if r.StatusCode != 409 || !requestID.MatchString(r.Header.Get("X-Request-Id")) {
				t.Fatalf("%d %v %s", r.StatusCode, r.Header, r.Body)
			}
			if code, typ := errorCode(t, r.Body); code != "idempotency_conflict" || typ != "idempotency_error" {
				t.Errorf("code %q type %q", code, typ)
			}
		}},
	}

	files, err := filepath.Glob(filepath.Join(eventsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no events in %s: %v", eventsDir, err)
	}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "env.") {
			continue // --env-vars files (samlocal_test.go), not events
		}
		if !slices.ContainsFunc(tests, func(tt eventTest) bool { return tt.event == filepath.Base(f) }) {
			t.Errorf("events/%s has no test here", filepath.Base(f))
		}
	}
	return tests
}

// checkReplay: r is a replay of first, byte for byte, with its request id.
func checkReplay(t *testing.T, first, r *rie.Response) {
	t.Helper()
	if first == nil {
		t.Fatal("no first answer to compare with")
	}
	if r.StatusCode != 200 || r.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("not a replay: %d %v %s", r.StatusCode, r.Header, r.Body)
	}
	for _, k := range []string{"X-Request-Id", "X-Gateway-Provider", "X-Gateway-Route-Depth", "Content-Type"} {
		if r.Header.Get(k) != first.Header.Get(k) {
			t.Errorf("%s: replay %q, first %q", k, r.Header.Get(k), first.Header.Get(k))
		}
	}
	if !bytes.Equal(r.Body, first.Body) {
		t.Errorf("replayed body differs:\nfirst  %s\nreplay %s", first.Body, r.Body)
	}
}

// checkStream: SSE events, a usage chunk with a cost, then [DONE].
func checkStream(t *testing.T, body []byte) {
	t.Helper()
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	if len(events) < 3 || events[len(events)-1] != "data: [DONE]" {
		t.Fatalf("stream does not end with data: [DONE]:\n%s", body)
	}
	var costs int
	for _, e := range events[:len(events)-1] {
		data, ok := strings.CutPrefix(e, "data: ")
		if !ok {
			t.Fatalf("not a data event: %q", e)
		}
		var chunk struct {
			Object string `json:"object"`
			Usage  *struct {
				Cost float64 `json:"cost"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
			t.Fatalf("not a chunk: %q (%v)", data, err)
		}
		if chunk.Usage != nil && chunk.Usage.Cost > 0 {
			costs++
		}
	}
	if costs != 1 {
		t.Errorf("%d usage chunks with a cost, want 1:\n%s", costs, body)
	}
}

// TestReplayAcrossColdStarts: a keyed request answered by one execution
// environment is replayed by a new one (another process, so nothing in
// memory) from DynamoDB, with the first answer's request id and body.
func TestReplayAcrossColdStarts(t *testing.T) {
	endpoint, table := newTable(t)
	a := startFunction(t, endpoint, table)
	first := invokeEvent(t, a, "chat-completion-keyed.json")
	checkAnswer(t, first, "application/json", "alpha", "0")
	a.Close()

	b := startFunction(t, endpoint, table)
	checkReplay(t, first, invokeEvent(t, b, "chat-completion-keyed-replay.json"))
	checkReplay(t, first, invokeEvent(t, b, "chat-completion-keyed.json"))
}

// TestInitMakesNoNetworkCalls: under Lambda, with the DynamoDB store, the
// cold start reaches its first GET .../invocation/next (the end of init)
// without connecting to DynamoDB or anywhere else through the SDK (a
// listener stands in for DynamoDB, another for an HTTP proxy). `make
// coldstart` measures the time this takes.
func TestInitMakesNoNetworkCalls(t *testing.T) {
	var dynamo, proxy atomic.Int32
	dynamoAddr := countConnections(t, &dynamo)
	proxyAddr := countConnections(t, &proxy)
	next := make(chan struct{}, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/2018-06-01/runtime/invocation/next" {
			select {
			case next <- struct{}{}:
			default:
			}
			<-r.Context().Done()
			return
		}
		t.Errorf("unexpected Runtime API call %s %s", r.Method, r.URL.Path)
	}))
	defer api.Close()

	cmd := exec.Command(bootstrap(t))
	cmd.Env = []string{
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(api.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=buzzgate-api",
		"BUZZGATE_STORE=dynamodb",
		"AWS_ENDPOINT_URL_DYNAMODB=http://" + dynamoAddr,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=x",
		"AWS_SECRET_ACCESS_KEY=x",
		"HTTP_PROXY=http://" + proxyAddr,
		"HTTPS_PROXY=http://" + proxyAddr,
	}
	var logs proc.SyncBuffer
	cmd.Stderr = &logs
	p, err := proc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Stop(0)
		api.CloseClientConnections()
	}()
	select {
	case <-next:
	case <-p.Exited():
		t.Fatalf("the bootstrap exited during init: %v\n%s", p.Err(), logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no GET .../next within 30s\n%s", logs.String())
	}
	time.Sleep(10 * time.Millisecond) // let a connection made just before be counted
	if dynamo.Load() != 0 || proxy.Load() != 0 {
		t.Errorf("during init the bootstrap connected %d times to DynamoDB and %d times through the proxy", dynamo.Load(), proxy.Load())
	}
}

// countConnections listens on 127.0.0.1, counts the connections it accepts
// (and closes them), and returns its address.
func countConnections(t *testing.T, n *atomic.Int32) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return l.Addr().String()
}
