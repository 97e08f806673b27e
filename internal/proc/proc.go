// Package proc finds, starts, watches and stops the programs that the tests
// and tools run as child processes (dynalite, the Lambda emulator, the
// gateway, the load generator's mock upstream), each on 127.0.0.1 and
// stopped by its PID.
package proc

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

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
