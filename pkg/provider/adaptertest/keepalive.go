package adaptertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// keepAliveFake serves every call with the opening and s.CutAfter pieces of
// a stream, then an event that carries no chunk (an empty data line; a
// ping in Messages), then nothing until the client goes: providertest sends
// no event of the test's choosing before a stall.
func keepAliveFake(t *testing.T, p Protocol, s Script) Fake {
	t.Helper()
	events := streamStart(p, s.Text[:s.CutAfter])
	var body string
	if p == Messages {
		body = sseBody(append(events, event{messages.EventPing, messages.Ping{Type: messages.EventPing}}), false)
	} else {
		body = sseBody(events, false) + "data: \n\n"
	}
	path := ""
	if p == ChatCompletions {
		path = "/v1"
	}
	return stallServer(t, body, path, func(b []byte) Received { return readRequest(t, p, b) })
}

// stallServer serves every call with body, then nothing until the client
// goes; the Fake's URL is the server's with path, and read reads a request
// body received.
func stallServer(t *testing.T, body, path string, read func([]byte) Received) Fake {
	t.Helper()
	var (
		mu       sync.Mutex
		received [][]byte
		done     = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		mu.Lock()
		received = append(received, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if _, err := io.WriteString(w, body); err != nil || http.NewResponseController(w).Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() {
		close(done)
		srv.Close()
	})
	return Fake{
		URL: srv.URL + path,
		Calls: func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(received)
		},
		Received: func() []Received {
			mu.Lock()
			defer mu.Unlock()
			var out []Received
			for _, b := range received {
				out = append(out, read(b))
			}
			return out
		},
	}
}
