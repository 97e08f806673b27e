package codexcli

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// ResponsesPath is the path the fake serves, under its URL's /v1: where a
// client whose base URL is URL() posts Responses API requests.
const ResponsesPath = responses.PathResponses

// Request is one HTTP request the fake received, whatever its method and
// path.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// JSON is Body decoded, or nil if Body is not a JSON object.
	JSON map[string]any
}

// Fake is a scripted fake Responses API upstream: a real HTTP server on
// 127.0.0.1 that answers each POST /v1/responses with the next scripted
// Response, streamed, and any other request with 404. It records every
// request. Once the script is used up it answers 500.
type Fake struct {
	srv    *http.Server
	url    string
	served chan struct{}

	mu      sync.Mutex
	script  []Response
	calls   int
	reqs    []Request
	handler func(call int, req Request) Response
}

// NewFake starts a fake on a free port of 127.0.0.1, closed when the test
// ends.
func NewFake(tb testing.TB) *Fake {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("codexcli: listen: %v", err)
	}
	f := &Fake{url: "http://" + ln.Addr().String() + "/v1", served: make(chan struct{})}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serveHTTP), ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		defer close(f.served)
		_ = f.srv.Serve(ln)
	}()
	tb.Cleanup(f.Close)
	return f
}

// URL is the base URL a Responses API client is given,
// http://127.0.0.1:PORT/v1.
func (f *Fake) URL() string { return f.url }

// Script queues answers: the next POST /v1/responses calls get rs in order.
func (f *Fake) Script(rs ...Response) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, rs...)
}

// SetHandler makes h decide every answer, overriding the script; call
// counts from 1. h may be called concurrently.
func (f *Fake) SetHandler(h func(call int, req Request) Response) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handler = h
}

// Calls is the number of POST /v1/responses received so far.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Requests returns every request received, of any method and path, in
// arrival order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Request, len(f.reqs))
	for i, r := range f.reqs {
		out[i] = r
		out[i].Header = r.Header.Clone()
		out[i].Body = bytes.Clone(r.Body)
		out[i].JSON = nil
		_ = json.Unmarshal(out[i].Body, &out[i].JSON)
	}
	return out
}

// Close stops the server and waits for it. It is safe to call more than
// once.
func (f *Fake) Close() {
	_ = f.srv.Close()
	<-f.served
}

func (f *Fake) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	_ = json.Unmarshal(body, &req.JSON)

	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	if r.Method != http.MethodPost || r.URL.Path != ResponsesPath {
		f.mu.Unlock()
		WriteError(w, http.StatusNotFound, "no such endpoint on the fake upstream")
		return
	}
	f.calls++
	call, h := f.calls, f.handler
	var resp Response
	scripted := h != nil
	if h == nil && len(f.script) > 0 {
		resp, f.script, scripted = f.script[0], f.script[1:], true
	}
	f.mu.Unlock()

	if h != nil {
		resp = h(call, req)
	}
	switch {
	case !scripted:
		WriteError(w, http.StatusInternalServerError, "the fake upstream's script is used up")
	case resp.Status != 0 && resp.Status != http.StatusOK:
		WriteError(w, resp.Status, "scripted error")
	default:
		model, _ := req.JSON["model"].(string)
		_ = Stream(w, Events(resp, model))
	}
}
