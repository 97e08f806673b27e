package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

var errReadPastBuffer = errors.New("read past what was buffered")

// TestReady: Ready says true only when the next event with data is whole in
// the buffer, so that Next will not wait on the underlying reader.
func TestReady(t *testing.T) {
	tests := []struct {
		name, stream string
		want         bool
	}{
		{"nothing buffered", "", false},
		{"one whole event", "data: a\n\n", true},
		{"a line without its end", "data: a", false},
		{"a data line without the blank line", "data: a\n", false},
		{"CRLF", "data: a\r\n\r\n", true},
		{"bare CR", "data: a\r\rdata: b\r\r", true},
		{"a CR that a LF may follow", "data: a\r", false},
		{"only a comment", ": keep-alive\n\n", false},
		{"a comment, then a whole event", ": ping\n\ndata: b\n\n", true},
		{"an event line without data", "event: x\n\n", false},
		{"data without a colon", "data\n\n", true},
		{"a field that only starts like data", "database: x\n\n", false},
		{"a whole event and the start of the next", "data: a\n\ndata: b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The first Next reads all of the text into the buffer; any later
			// read from the source fails, so a Next after a true Ready must
			// be served from the buffer alone.
			src := io.MultiReader(strings.NewReader("data: first\n\n"+tt.stream), iotest.ErrReader(errReadPastBuffer))
			r := NewReader(src, 1<<16)
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
			if got := r.Ready(); got != tt.want {
				t.Errorf("Ready() = %v, want %v after %q", got, tt.want, tt.stream)
			}
			if tt.want {
				// What Ready promised: the next event comes from the buffer.
				if _, err := r.Next(); err != nil {
					t.Errorf("Ready said true, then Next: %v", err)
				}
			}
		})
	}
}

func TestReadyAfterEnd(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\n"), 1<<16)
	r.Next()
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("second Next: %v", err)
	}
	if r.Ready() {
		t.Error("Ready after the end")
	}
	r.Release()
	if r.Ready() {
		t.Error("Ready after Release")
	}
}
