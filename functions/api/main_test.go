package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
	addr := freeAddr(t)
	cmd := exec.Command(bootstrap(t))
	cmd.Env = append(os.Environ(), "BUZZGATE_ADDR="+addr, "BUZZGATE_CONFIG=", "BUZZGATE_STORE=", "AWS_LAMBDA_RUNTIME_API=")
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	base := "http://" + addr
	waitReady(t, base+"/healthz", exited)

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

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
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

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitReady(t *testing.T, url string, exited chan error) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the gateway exited at start-up: %v", err)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not ready after 15s", url)
}
