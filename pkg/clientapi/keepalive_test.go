package clientapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/llm"
	chatwire "github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// keepAliveServer serves one request whose wire keeps the connection busy
// every `every` while the handler waits for the client to have read the
// first byte (read), then calls answer on the wire.
func keepAliveServer(t *testing.T, every time.Duration, answer func(o *Wire)) (url string, read chan struct{}, rec chan *Recorder) {
	t.Helper()
	read, rec = make(chan struct{}), make(chan *Recorder, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := &Recorder{ResponseWriter: w}
		rc.Header().Set("X-Request-Id", "req_1")
		o := newWire(rc, time.Second, openAIErrors{})
		o.SetKeepAlive(every)
		stop := o.KeepAlive()
		defer stop()
		select {
		case <-read:
		case <-time.After(10 * time.Second):
		}
		answer(o)
		rec <- rc
	}))
	t.Cleanup(srv.Close)
	return srv.URL, read, rec
}

// TestKeepAliveThenAnswer: while a JSON answer is produced, the wire sends
// the status 200 and whitespace; the answer follows, and the body parses
// as the answer.
func TestKeepAliveThenAnswer(t *testing.T) {
	url, read, rec := keepAliveServer(t, 20*time.Millisecond, func(o *Wire) {
		o.Start(http.StatusOK, map[string]string{"Content-Type": "application/json", "X-Gateway-Provider": "p0"}, false)
		o.Body([]byte(`{"object":"chat.completion"}` + "\n"))
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadByte()
	close(read)
	if err != nil || first != ' ' || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Request-Id") != "req_1" {
		t.Fatalf("first byte %q %v, head %d %v", first, err, resp.StatusCode, resp.Header)
	}
	rest, err := io.ReadAll(br)
	var a struct{ Object string }
	if err != nil || json.Unmarshal(rest, &a) != nil || a.Object != "chat.completion" {
		t.Errorf("body %q, %v", rest, err)
	}
	if r := <-rec; r.Status != 200 {
		t.Errorf("recorded status %d", r.Status)
	}
}

// TestKeepAliveThenError: an error after the keep-alive began is the
// error envelope in the 200 body; the recorder keeps its code for the log.
func TestKeepAliveThenError(t *testing.T) {
	url, read, rec := keepAliveServer(t, 20*time.Millisecond, func(o *Wire) {
		o.Error(&llm.Error{Code: llm.CodeAllProvidersFailed, Message: "every provider failed"})
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadByte()
	close(read)
	if err != nil || first != ' ' || resp.StatusCode != 200 {
		t.Fatalf("first byte %q %v, status %d", first, err, resp.StatusCode)
	}
	rest, _ := io.ReadAll(br)
	var e chatwire.Error
	if json.Unmarshal(rest, &e) != nil || e.Error.Code == nil || *e.Error.Code != "all_providers_failed" {
		t.Errorf("body %q", rest)
	}
	if r := <-rec; r.Code != llm.CodeAllProvidersFailed || r.Status != 502 || !r.KeptAlive {
		t.Errorf("recorded %d %q", r.Status, r.Code)
	}
}

// TestNoKeepAliveBeforeInterval: an answer or error that comes before the
// interval goes out as without a keep-alive: its own status, its headers,
// its Content-Length.
func TestNoKeepAliveBeforeInterval(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(o *Wire)
		status int
	}{
		{"answer", func(o *Wire) {
			o.Start(http.StatusOK, map[string]string{"Content-Type": "application/json", "X-Gateway-Provider": "p0"}, false)
			o.Body([]byte("{}\n"))
		}, 200},
		{"error", func(o *Wire) { o.Error(&llm.Error{Code: llm.CodeAllProvidersFailed, Message: "x"}) }, 502},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, read, _ := keepAliveServer(t, time.Hour, c.answer)
			close(read)
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || resp.ContentLength != int64(len(b)) || len(b) == 0 || b[0] != '{' {
				t.Errorf("%d, content length %d, body %q", resp.StatusCode, resp.ContentLength, b)
			}
			if c.status == 200 && resp.Header.Get("X-Gateway-Provider") != "p0" {
				t.Errorf("headers %v", resp.Header)
			}
		})
	}
}

// openAIErrors writes errors in OpenAI's envelope (WriteError).
type openAIErrors struct{}

func (openAIErrors) WriteError(w http.ResponseWriter, err error) int { return WriteError(w, err) }
