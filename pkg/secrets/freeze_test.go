//go:build unix

package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// heldSecret is a Secrets Manager that answers GetSecretValue with
// values[i] for its i-th call, and holds the calls hold names without
// answering (until the caller goes away or the test ends), telling held.
type heldSecret struct {
	srv    *httptest.Server
	calls  atomic.Int32
	held   chan int
	values []string
}

func newHeldSecret(t *testing.T, hold int, values ...string) *heldSecret {
	h := &heldSecret{held: make(chan int, 4), values: values}
	done := make(chan struct{})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(h.calls.Add(1))
		if n == hold {
			h.held <- n
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		v := h.values[min(n, len(h.values))-1]
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		json.NewEncoder(w).Encode(map[string]any{"ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:s-abcdef", "Name": "s", "SecretString": v})
	}))
	t.Cleanup(func() { close(done); h.srv.Close() })
	return h
}

func heldClient(url string) *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		Retryer:      aws.NopRetryer{},
	})
}

// freezeChildEnv tells the test binary, run again by TestRefreshAcrossFreeze,
// to be the process that is frozen (TestMain).
const freezeChildEnv = "BUZZGATE_TEST_SECRETS_FREEZE_CHILD"

// childReadTimeout is the child's read deadline; childFreeze how long it is
// stopped, well past the deadline and freezeSlack.
const (
	childReadTimeout = time.Second
	childFreeze      = 4 * time.Second
)

func TestMain(m *testing.M) {
	if url := os.Getenv(freezeChildEnv); url != "" {
		os.Exit(freezeChild(url))
	}
	os.Exit(m.Run())
}

// freezeChild opens the secret at url, starts a refresh once the interval
// has passed, waits for it and prints what it counted and holds.
func freezeChild(url string) int {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	var m counter
	s, err := Open(context.Background(), heldClient(url), "s", Options{
		Refresh: time.Minute, ReadTimeout: childReadTimeout, Metrics: &m,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
	})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	s.Get("K") // starts the refresh, which the parent freezes mid-read
	s.Wait()
	v, _ := s.Get("K")
	json.NewEncoder(os.Stdout).Encode(map[string]any{"failures": m.get("SecretRefreshFailures"), "value": v})
	return 0
}

// TestRefreshAcrossFreeze: a refresh whose read is in flight when the
// process is frozen (a Lambda environment between invocations, here a real
// process stopped with SIGSTOP for longer than the read's deadline) does
// not count a failure when the process resumes: the secret is read again,
// and the rotated value is taken.
func TestRefreshAcrossFreeze(t *testing.T) {
	sm := newHeldSecret(t, 2, `{"K":"sk-one"}`, `{"K":"sk-one"}`, `{"K":"sk-two"}`)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), freezeChildEnv+"="+sm.srv.URL)
	var out proc.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-exited
	})
	select {
	case <-sm.held:
	case <-exited:
		t.Fatalf("the child ended before its refresh: %v\n%s", waitErr, out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the child's refresh did not reach the secret\n%s", out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(childFreeze)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("child: %v\n%s", waitErr, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not finish its refresh\n%s", out.String())
	}
	var got struct {
		Failures float64
		Value    string
	}
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("child output %q: %v", out.String(), err)
	}
	if got.Failures != 0 || got.Value != "sk-two" || sm.calls.Load() != 3 {
		t.Errorf("after the freeze: %v failures counted, value %q, %d reads; want none counted, the rotated value read again",
			got.Failures, got.Value, sm.calls.Load())
	}
}

// TestRefreshTimeoutCounts: a read that reaches its deadline while the
// process runs is a failure: counted once, the last good value kept, not
// read again before the refresh interval.
func TestRefreshTimeoutCounts(t *testing.T) {
	sm := newHeldSecret(t, 2, `{"K":"sk-one"}`, `{"K":"sk-one"}`, `{"K":"sk-two"}`)
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	var m counter
	s, err := Open(context.Background(), heldClient(sm.srv.URL), "s", Options{
		Refresh: time.Minute, ReadTimeout: 200 * time.Millisecond, Metrics: &m,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	s.Get("K")
	s.Wait()
	if v, _ := s.Get("K"); v != "sk-one" || m.get("SecretRefreshFailures") != 1 {
		t.Errorf("a read that timed out: value %q, %v failures; want the last good value and 1", v, m.get("SecretRefreshFailures"))
	}
	s.Wait()
	if n := sm.calls.Load(); n != 2 {
		t.Errorf("%d reads, want 2: read again before the interval", n)
	}
}
