// Package proc starts, watches and stops the child processes of the tests
// and tools (dynalite, the Lambda emulator, the gateway, the load
// generator's mock upstream), each on 127.0.0.1 and stopped by its PID.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// FreeAddr returns a loopback address, 127.0.0.1:PORT, whose port was free
// when asked. Another process may take it before the caller binds it, so a
// caller that starts a server there retries with a new address when the
// server fails to start.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// SyncBuffer is an io.Writer safe for concurrent use (a child's stdout and
// stderr, a logger) whose content can be read while it is written to. It
// keeps the first Limit bytes written (everything when Limit is 0) and
// accepts the rest without keeping it. The zero value is ready to use.
type SyncBuffer struct {
	Limit int

	mu  sync.Mutex
	buf bytes.Buffer
}

// Write keeps what fits under the limit and reports all of p written.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := p
	if b.Limit > 0 {
		keep = p[:min(len(p), max(b.Limit-b.buf.Len(), 0))]
	}
	b.buf.Write(keep)
	return len(p), nil
}

// String is what has been kept so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Process is a started child process. A goroutine waits for it, so that
// Exited tells when it has ended whoever is watching.
type Process struct {
	// Cmd is the command started; Cmd.ProcessState is set once Exited is
	// closed.
	Cmd *exec.Cmd

	exited chan struct{}
	err    error // cmd.Wait's, set before exited is closed
	stop   sync.Once
}

// Start starts cmd with SetPdeathsig, so that the child does not outlive
// this process when it dies without stopping it (a test binary's panic on
// timeout, a SIGKILL). The caller must Stop it.
func Start(cmd *exec.Cmd) (*Process, error) {
	SetPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// PID is the process's id.
func (p *Process) PID() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has ended and its output has been
// copied.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is how the process ended, cmd.Wait's error (nil for exit status 0);
// valid once Exited is closed.
func (p *Process) Err() error { return p.err }

// Stop ends the process and waits until it has: SIGTERM, then SIGKILL if it
// is still running after grace (at once when grace is 0). It does nothing
// to a process that has already ended, and later calls only wait.
func (p *Process) Stop(grace time.Duration) {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		if grace > 0 {
			_ = p.Cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
				return
			case <-time.After(grace):
			}
		}
		_ = p.Cmd.Process.Kill()
	})
	<-p.exited
}

// readyPoll is how often WaitReady checks.
const readyPoll = 20 * time.Millisecond

// WaitReady calls ready until it returns nil. It fails when the process
// ends first, or with ready's last error when timeout has passed.
func (p *Process) WaitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("exited before it was ready (%s)", p.Cmd.ProcessState)
		default:
		}
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s: %w", timeout, err)
		}
		select {
		case <-p.exited:
		case <-time.After(readyPoll):
		}
	}
}

// Accepting is a check for WaitReady: addr accepts a TCP connection.
func Accepting(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// HTTPOK is a check for WaitReady: GET url answers 200 OK.
func HTTPOK(url string) func() error {
	return func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// Retry calls start up to n times, until it succeeds, and returns the errors
// joined if it never does: a server started on a FreeAddr fails when another
// process took the port first, and the next try takes a new one.
func Retry[T any](n int, start func() (T, error)) (T, error) {
	var errs []error
	for range n {
		v, err := start()
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	var zero T
	return zero, errors.Join(errs...)
}

// ModuleRoot is the directory holding go.mod, found by walking up from the
// working directory (a test's is its package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Tool finds a program the Makefile installs under .tools: the path in the
// environment variable env when it is set, else rel under ModuleRoot. The
// file must exist; the error starts with missing, which says how to install
// it.
func Tool(env, rel, missing string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s (%s=%s: %v)", missing, env, p, err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("%s (%v)", missing, err)
	}
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s (%v)", missing, err)
	}
	return p, nil
}
