package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a bytes.Buffer safe for the flusher goroutine and the test.
type syncBuf struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuf) snapshot() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String(), s.writes
}

func TestLineBufferBatchesWholeLines(t *testing.T) {
	var dst syncBuf
	lb := newLineBuffer(&dst, 4096, time.Hour) // no periodic flush in this test
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(lb, "{\"g\":%d,\"i\":%d,\"pad\":%q}\n", g, i, strings.Repeat("x", 40))
			}
		}()
	}
	wg.Wait()
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	out, writes := dst.snapshot()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "{\"g\":") || !strings.HasSuffix(l, "\"}") {
			t.Fatalf("a line was split or interleaved: %q", l)
		}
	}
	// About 60 bytes a line, flushed at 2 KiB: far fewer writes than lines.
	if writes > 800/10 {
		t.Errorf("%d writes for 800 lines: not batched", writes)
	}
	// After Close, each line goes out at once.
	fmt.Fprintln(lb, "late")
	if out, _ := dst.snapshot(); !strings.HasSuffix(out, "late\n") {
		t.Errorf("a line written after Close is still buffered")
	}
}

func TestLineBufferFlushesPeriodically(t *testing.T) {
	var dst syncBuf
	lb := newLineBuffer(&dst, 1<<16, 10*time.Millisecond)
	defer lb.Close()
	fmt.Fprintln(lb, "one line")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if out, _ := dst.snapshot(); out == "one line\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a buffered line was not flushed by the periodic flush")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
