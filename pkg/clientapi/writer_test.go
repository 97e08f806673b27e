package clientapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buzzgate/buzzgate/pkg/lambdaedge"
)

// A wire bounds its writes only on a connection that takes deadlines and
// with a write timeout: a keyed request's pump writes small answers itself
// only then (pkg/gateway's pump).
func TestWireWritesBounded(t *testing.T) {
	got := make(chan [2]bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &Recorder{ResponseWriter: w}
		got <- [2]bool{newWire(rec, time.Second, nil).WritesBounded(), newWire(rec, 0, nil).WritesBounded()}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b := <-got; !b[0] || b[1] {
		t.Errorf("on a server connection: with a timeout %v (want true), without %v (want false)", b[0], b[1])
	}
	if newWire(&Recorder{ResponseWriter: httptest.NewRecorder()}, time.Second, nil).WritesBounded() {
		t.Error("a test recorder reported bounded writes")
	}
	// The Lambda edge writes into a pipe the runtime drains, without
	// deadlines.
	edge := lambdaedge.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- [2]bool{newWire(&Recorder{ResponseWriter: w}, time.Second, nil).WritesBounded()}
		w.Write([]byte("ok"))
	}))
	sr, err := edge(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodGet, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(sr.Body)
	if b := <-got; b[0] {
		t.Error("the Lambda edge's writer reported bounded writes")
	}
}

// Asking whether writes are bounded leaves the connection with a deadline:
// a write after the question, to a client that reads nothing, fails instead
// of waiting for it. (The probe used to clear the deadline.)
func TestWireWritesBoundedKeepsADeadline(t *testing.T) {
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := newWire(&Recorder{ResponseWriter: w}, 100*time.Millisecond, nil)
		if !o.WritesBounded() {
			done <- errors.New("a server connection reported unbounded writes")
			return
		}
		chunk := make([]byte, 64<<10)
		for i := 0; i < 16<<10; i++ { // up to 1 GiB: far more than the socket buffers take
			if _, err := w.Write(chunk); err != nil {
				done <- nil
				return
			}
		}
		done <- errors.New("1 GiB written to a client that reads nothing")
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's write still waits on a client that reads nothing")
	}
}

// newWire is a Wire of its own.
func newWire(w *Recorder, writeTimeout time.Duration, envelope ErrorWriter) *Wire {
	o := new(Wire)
	o.Init(w, writeTimeout, envelope)
	return o
}

// deadlineCounter is a writer that counts the write deadlines it is
// asked for, taking them or not.
type deadlineCounter struct {
	*httptest.ResponseRecorder
	takes bool
	asked int
}

func (d *deadlineCounter) SetWriteDeadline(time.Time) error {
	d.asked++
	if !d.takes {
		return fmt.Errorf("%w", http.ErrNotSupported)
	}
	return nil
}

// A writer that takes write deadlines gets one before each write; one that
// takes none is asked once, and its writes go on without.
func TestWireAsksForDeadlinesOnce(t *testing.T) {
	for _, takes := range []bool{true, false} {
		d := &deadlineCounter{ResponseRecorder: httptest.NewRecorder(), takes: takes}
		o := newWire(&Recorder{ResponseWriter: d}, time.Second, nil)
		if got := o.WritesBounded(); got != takes {
			t.Errorf("takes deadlines %v: WritesBounded() = %v", takes, got)
		}
		o.Start(http.StatusOK, map[string]string{"Content-Type": "text/event-stream"}, true)
		for range 3 {
			if err := o.Event("", []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		if o.WritesBounded() != takes {
			t.Errorf("takes deadlines %v: WritesBounded() changed its answer", takes)
		}
		want := 1
		if takes {
			want = 6 // each probe, the stream's start and each event
		}
		if d.asked != want || d.Body.String() != "data: {}\n\ndata: {}\n\ndata: {}\n\n" {
			t.Errorf("takes deadlines %v: asked %d times (want %d), wrote %q", takes, d.asked, want, d.Body.String())
		}
	}
}

// writeCounter is a listener whose connections count their writes.
type writeCounter struct {
	net.Listener
	writes chan int
}

func (l writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, writes: l.writes}, nil
}

type countingConn struct {
	net.Conn
	n      int
	writes chan int
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.n++
	return c.Conn.Write(b)
}

func (c *countingConn) Close() error {
	c.writes <- c.n
	return c.Conn.Close()
}

// A JSON answer that fits the connection's buffer leaves in one write, its
// status, headers (Content-Length among them) and body together: a second
// write would cost the client a round of wake-ups for nothing.
func TestWireBodyOneWrite(t *testing.T) {
	body := []byte(`{"id":"x","choices":[{"message":{"content":"` + strings.Repeat("word ", 200) + `"}}]}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	writes := make(chan int, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := newWire(&Recorder{ResponseWriter: w}, time.Second, nil)
		o.Start(http.StatusOK, map[string]string{"Content-Type": "application/json"}, false)
		if err := o.Body(body); err != nil {
			t.Error(err)
		}
	})}
	go srv.Serve(writeCounter{Listener: ln, writes: writes})
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, body) || resp.ContentLength != int64(len(body)) {
		t.Fatalf("answer: %d bytes, Content-Length %d, %v; want %d bytes", len(got), resp.ContentLength, err, len(body))
	}
	select {
	case n := <-writes:
		if n != 1 {
			t.Errorf("the answer went out in %d writes, want 1", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not close the connection")
	}
}
