package gateway

import (
	"log/slog"

	"github.com/buzzgate/buzzgate/pkg/metrics"
)

// Log collects what a request's log line and metrics need. Never a prompt,
// an answer or a key: only ids, names and numbers.
type Log struct {
	// Off: no log line will be written (its level is not enabled), so Add
	// keeps nothing.
	Off        bool
	Attrs      []slog.Attr
	Metrics    metrics.Request
	ClientGone bool
}

// Add appends attributes to the log line.
func (l *Log) Add(a ...slog.Attr) {
	if !l.Off {
		l.Attrs = append(l.Attrs, a...)
	}
}
