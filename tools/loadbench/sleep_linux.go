package main

import (
	"runtime"
	"syscall"
	"time"
)

const (
	prSetTimerslack     = 29
	defaultTimerslackNs = 50000
)

// precisePacer prepares the calling goroutine to pace requests: Go's timers
// wake a sleeper up to about a millisecond late when the runtime is idle,
// which would add itself to every latency measured from the intended send
// time. Pinned to its thread with a 1 ns timer slack, nanosleep wakes within
// tens of microseconds. It returns the function that undoes both.
func precisePacer() (done func()) {
	runtime.LockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	return func() {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, defaultTimerslackNs, 0)
		runtime.UnlockOSThread()
	}
}

// sleepUntil blocks the calling thread until t.
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil)
	}
}
