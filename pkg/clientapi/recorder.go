package clientapi

import (
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Recorder remembers the status written, for the log line; Unwrap lets
// http.ResponseController reach the connection's Flush.
type Recorder struct {
	http.ResponseWriter
	Status int
	Wrote  bool
	// Code is the error code written, if any.
	Code llm.Code
	// Aborted: the client is to be dropped when the handler returns
	// (wire.Abort).
	Aborted bool
	// KeptAlive: the status 200 went out with a keep-alive's whitespace
	// (Wire.KeepAlive); an error after it has its own status in Status,
	// for the log, but not on the wire.
	KeptAlive bool
}

// WriteHeader passes the first status on; a later one is dropped, as
// net/http would (with a "superfluous WriteHeader" log line): an error
// envelope written after a keep-alive fixed the status (Wire.KeepAlive).
func (r *Recorder) WriteHeader(code int) {
	if r.Wrote {
		return
	}
	r.Status, r.Wrote = code, true
	r.ResponseWriter.WriteHeader(code)
}

func (r *Recorder) Write(b []byte) (int, error) {
	if !r.Wrote {
		r.Status, r.Wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
