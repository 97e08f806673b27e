package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a child process (see TestMain).
const helperEnv = "PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is a child's behaviour: "wait" exits 0 on SIGTERM, "stubborn"
// ignores SIGTERM (both print "ready" once they do), "fail" exits 3 at once, "serve" answers HTTP on
// PROC_TEST_ADDR, "parent" starts a "stubborn" child with Start, prints
// its PID and waits.
func helper(mode string) int {
	switch mode {
	case "wait":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		sleepForever()
	case "fail":
		fmt.Fprintln(os.Stderr, "failing on purpose")
		return 3
	case "serve":
		err := http.ListenAndServe(os.Getenv("PROC_TEST_ADDR"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				http.NotFound(w, r)
			}
		}))
		fmt.Fprintln(os.Stderr, err)
		return 1
	case "parent":
		runtime.LockOSThread()
		p, err := Start(child("stubborn"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(p.PID())
		sleepForever()
	}
	return 2
}

// sleepForever blocks for good. A bare select{} would not: with nothing
// else to run (signal.Ignore starts no goroutine), a binary built without
// cgo ends on the runtime's deadlock check, exit status 2.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// child is a command running the test binary as the helper mode.
func child(mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	return cmd
}

func start(t *testing.T, cmd *exec.Cmd) *Process {
	t.Helper()
	p, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	return p
}

func TestFreeAddr(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("FreeAddr() = %q (%v), want 127.0.0.1:PORT", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 {
		t.Fatalf("FreeAddr() port %q", port)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is not free: %v", err)
	}
	l.Close()
}

func TestSyncBufferLimit(t *testing.T) {
	b := &SyncBuffer{Limit: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if got := b.String(); got != "abcde" {
		t.Errorf("String() = %q, want the first 5 bytes %q", got, "abcde")
	}
}

func TestSyncBufferConcurrent(t *testing.T) {
	var b SyncBuffer // no limit
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Errorf("kept %d bytes, want 800", got)
	}
}

// startReady starts a helper that prints "ready".
func startReady(t *testing.T, mode string) *Process {
	t.Helper()
	cmd := child(mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, cmd)
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the %s child said %q", mode, line)
	}
	return p
}

func TestStopTerminates(t *testing.T) {
	p := startReady(t, "wait")
	p.Stop(10 * time.Second)
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process ended")
	}
	if err := p.Err(); err != nil {
		t.Errorf("a process ending on SIGTERM by itself: %v, want exit status 0", err)
	}
	p.Stop(time.Second) // again: only waits
}

func TestStopKillsAfterGrace(t *testing.T) {
	p := startReady(t, "stubborn")
	const grace = 200 * time.Millisecond
	began := time.Now()
	p.Stop(grace)
	if took := time.Since(began); took < grace {
		t.Errorf("Stop took %s, less than the grace period %s", took, grace)
	}
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("ended with %s, want killed", p.Cmd.ProcessState)
	}
}

func TestStopAtOnce(t *testing.T) {
	p := start(t, child("wait"))
	p.Stop(0)
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("ended with %s, want killed", p.Cmd.ProcessState)
	}
}

func TestWaitReady(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, child("serve", "PROC_TEST_ADDR="+addr))
	if err := p.WaitReady(10*time.Second, Accepting(addr)); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(10*time.Second, HTTPOK("http://"+addr+"/healthz")); err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(100*time.Millisecond, HTTPOK("http://"+addr+"/missing"))
	if err == nil || !strings.Contains(err.Error(), "not ready within") || !strings.Contains(err.Error(), "404") {
		t.Errorf("a check that keeps failing: %v, want a timeout with its last error", err)
	}
}

func TestWaitReadyExited(t *testing.T) {
	var out SyncBuffer
	cmd := child("fail")
	cmd.Stderr = &out
	p := start(t, cmd)
	err := p.WaitReady(time.Minute, func() error { return errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a process that ends: %v, want its exit status", err)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || ee.ExitCode() != 3 {
		t.Errorf("Err() = %v, want exit status 3", p.Err())
	}
	if !strings.Contains(out.String(), "failing on purpose") {
		t.Errorf("output %q", out.String())
	}
}

func TestSetPdeathsigKeepsAttributes(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	SetPdeathsig(cmd)
	if !cmd.SysProcAttr.Setpgid {
		t.Error("SetPdeathsig dropped the attributes already set")
	}
}

// TestPdeathsig kills a process that started a child with Start, without
// letting it stop the child: the kernel kills the child.
func TestPdeathsig(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux's")
	}
	cmd := child("parent")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parent := start(t, cmd)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the parent did not print its child's PID: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	parent.Stop(0)
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the child %d outlived its parent by 10s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive says whether pid runs (neither gone nor a zombie waiting for init to
// reap it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestRetry(t *testing.T) {
	calls := 0
	v, err := Retry(3, func() (int, error) {
		calls++
		if calls < 2 {
			return 0, fmt.Errorf("try %d", calls)
		}
		return 42, nil
	})
	if v != 42 || err != nil || calls != 2 {
		t.Errorf("Retry = %d, %v after %d calls; want 42, nil after 2", v, err, calls)
	}
	calls = 0
	_, err = Retry(3, func() (int, error) { calls++; return 0, fmt.Errorf("try %d", calls) })
	if calls != 3 || err == nil || !strings.Contains(err.Error(), "try 1") || !strings.Contains(err.Error(), "try 3") {
		t.Errorf("Retry that never succeeds: %v after %d calls; want every try's error after 3", err, calls)
	}
}

func TestTool(t *testing.T) {
	const env, missing = "PROC_TEST_TOOL", "not installed: run make tools"
	t.Setenv(env, "")
	p, err := Tool(env, "go.mod", missing)
	if err != nil || !strings.HasSuffix(p, "/go.mod") || strings.HasSuffix(p, "/internal/proc/go.mod") {
		t.Fatalf("Tool under the module root = %q, %v", p, err)
	}
	root, err := ModuleRoot()
	if err != nil || p != root+"/go.mod" {
		t.Errorf("ModuleRoot() = %q, %v; Tool found %q", root, err, p)
	}
	if _, err := Tool(env, "no/such/tool", missing); err == nil || !strings.HasPrefix(err.Error(), missing) {
		t.Errorf("Tool for a missing file: %v, want an error starting %q", err, missing)
	}

	given := t.TempDir() + "/tool"
	t.Setenv(env, given)
	if _, err := Tool(env, "go.mod", missing); err == nil || !strings.HasPrefix(err.Error(), missing) || !strings.Contains(err.Error(), env+"="+given) {
		t.Errorf("Tool with %s naming a missing file: %v", env, err)
	}
	if err := os.WriteFile(given, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := Tool(env, "go.mod", missing); p != given || err != nil {
		t.Errorf("Tool with %s set = %q, %v; want %q", env, p, err, given)
	}
}
