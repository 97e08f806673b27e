package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// lineBuffer batches the local server's log lines: one write to the
// underlying file per flush instead of one per line (a system call per
// request is a measurable part of a request's cost under load; see
// docs/performance.md). slog hands it one whole line per Write, so
// lines are never split or interleaved. It flushes when it holds flushAt
// bytes, every interval, and on Close; a crash loses at most the last
// interval's lines. Under Lambda the log is not buffered: an environment
// is frozen between invocations, and CloudWatch reads stdout and stderr as
// they are written.
type lineBuffer struct {
	mu      sync.Mutex
	w       *bufio.Writer
	flushAt int
	stop    chan struct{}
	done    chan struct{}
}

func newLineBuffer(w io.Writer, size int, interval time.Duration) *lineBuffer {
	b := &lineBuffer{w: bufio.NewWriterSize(w, size), flushAt: size / 2, stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop(interval)
	return b
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.w.Write(p)
	if err == nil && b.w.Buffered() >= b.flushAt {
		err = b.w.Flush()
	}
	return n, err
}

func (b *lineBuffer) loop(interval time.Duration) {
	defer close(b.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.Flush()
		case <-b.stop:
			return
		}
	}
}

// Flush writes what is buffered.
func (b *lineBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Flush()
}

// Close stops the periodic flush and flushes; later writes go out at once.
func (b *lineBuffer) Close() error {
	close(b.stop)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushAt = 0
	return b.w.Flush()
}
