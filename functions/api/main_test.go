package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/internal/rie"
)

// eventsDir holds the sample events (`make invoke EVENT=...`).
const eventsDir = "../../events"

// built is the gateway's binary, built once, by the first test that needs
// it, as the Lambda build is (-tags lambda.norpc) and with -race when the
// tests run with it. It serves HTTP or, under the emulator, Lambda events.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func bootstrap(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "buzzgate-api-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "bootstrap")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		built.err = rie.Build(ctx, ".", built.path, raceFlags...)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// afterTests run once every test has, with the tests' exit code: the
// integration tier's shared servers register their Close here.
var afterTests []func(code int)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range afterTests {
		f(code)
	}
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// TestBinary starts the gateway as `make run` does (embedded demo config),
// sends the README's requests and stops it with SIGTERM.
func TestBinary(t *testing.T) {
	g := startGateway(t, "BUZZGATE_CONFIG=", "BUZZGATE_STORE=")
	base, logs := g.base, g.logs

	post := func(body string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-demo")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	resp, m := post(`{"model":"demo/chat","messages":[{"role":"user","content":"Hello"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Provider") != "alpha" || resp.Header.Get("X-Gateway-Route-Depth") != "0" {
		t.Fatalf("demo/chat: %d %v %v", resp.StatusCode, resp.Header, m)
	}
	usage, _ := m["usage"].(map[string]any)
	if cost, ok := usage["cost"].(float64); !ok || cost <= 0 {
		t.Errorf("demo/chat usage %v has no cost", usage)
	}
	resp, m = post(`{"model":"demo/fallback","messages":[{"role":"user","content":"Hello"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Provider") != "alpha" || resp.Header.Get("X-Gateway-Route-Depth") != "1" {
		t.Fatalf("demo/fallback: %d %v %v", resp.StatusCode, resp.Header, m)
	}

	if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Exited():
		if err := g.Err(); err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not stop within 10s of SIGTERM")
	}
	if strings.Contains(logs.String(), "sk-demo") || strings.Contains(logs.String(), "Hello") {
		t.Errorf("the logs carry a key or a prompt:\n%s", logs.String())
	}
	// The log is written in batches: the requests' lines are all out by the
	// time the process has exited.
	if n := strings.Count(logs.String(), `"msg":"request"`); n < 2 {
		t.Errorf("%d request log lines after exit, want at least 2:\n%s", n, logs.String())
	}
}

// gatewayProc is the gateway running as the local HTTP server.
type gatewayProc struct {
	*proc.Process
	base string           // http://127.0.0.1:PORT
	logs *proc.SyncBuffer // its stderr
}

// startGateway starts the bootstrap as the local HTTP server on a free port
// of 127.0.0.1, with env added to this process's environment, and waits
// until /healthz answers. It is killed when the test ends, and its logs
// are logged if the test failed.
func startGateway(t *testing.T, env ...string) *gatewayProc {
	t.Helper()
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bootstrap(t))
	cmd.Env = append(append(os.Environ(), "BUZZGATE_ADDR="+addr, "AWS_LAMBDA_RUNTIME_API="), env...)
	g := &gatewayProc{base: "http://" + addr, logs: &proc.SyncBuffer{}}
	cmd.Stderr = g.logs
	if g.Process, err = proc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Stop(0)
		if t.Failed() {
			t.Logf("gateway %s logs:\n%s", addr, g.logs.String())
		}
	})
	if err := g.WaitReady(15*time.Second, proc.HTTPOK(g.base+"/healthz")); err != nil {
		t.Fatalf("the gateway did not start: %v\n%s", err, g.logs.String())
	}
	return g
}
