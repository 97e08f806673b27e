package proc

import (
	"bytes"
	"sync"
)

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
