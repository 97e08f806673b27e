package systemtest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the writes made on the connections it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
	mu     sync.Mutex
	conns  []*countingConn
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c, n: &l.writes}
	l.mu.Lock()
	l.conns = append(l.conns, cc)
	l.mu.Unlock()
	return cc, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
	// first is what the first write on the connection carried.
	first atomic.Pointer[[]byte]
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.first.Load() == nil {
		b := append([]byte(nil), p...)
		c.first.CompareAndSwap(nil, &b)
	}
	c.n.Add(1)
	return c.Conn.Write(p)
}

// streamGateway is the gateway in front of upstream, on a listener that
// counts its writes to clients.
func streamGateway(t *testing.T, upstream http.Handler) (url string, writes *atomic.Int64) {
	t.Helper()
	url, cl := streamGatewayListener(t, upstream)
	return url, &cl.writes
}

// streamGatewayListener is streamGateway with its listener.
func streamGatewayListener(t *testing.T, upstream http.Handler) (string, *countingListener) {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	a := oneRouteApp(t, up.URL+"/v1", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	gw := httptest.NewUnstartedServer(a.Handler)
	gw.Listener = cl
	gw.Start()
	t.Cleanup(gw.Close)
	return gw.URL, cl
}

func chunkEvent(text string) string {
	return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", text)
}

const streamEnd = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":40,\"total_tokens\":43}}\n\n" +
	"data: [DONE]\n\n"

// TestStreamBurstOneWrite: forty chunks that the provider sends at once
// reach the client in a handful of writes, not one write per chunk, and
// all of them arrive.
func TestStreamBurstOneWrite(t *testing.T) {
	var burst strings.Builder
	for i := range 40 {
		burst.WriteString(chunkEvent(fmt.Sprintf("w%d ", i)))
	}
	burst.WriteString(streamEnd)
	url, writes := streamGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, burst.String())
	}))
	resp := postTo(t, url, chatBody(`"stream":true`))
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	for i := range 40 {
		if !strings.Contains(string(body), fmt.Sprintf(`"w%d "`, i)) {
			t.Fatalf("chunk %d missing from the stream:\n%s", i, body)
		}
	}
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("the stream does not end with [DONE]:\n%s", body)
	}
	// The headers, the burst, the usage chunk and [DONE] (and the chunked
	// encoding's end): far fewer than one write per chunk.
	if n := writes.Load(); n > 8 {
		t.Errorf("%d writes to the client for a burst of 40 chunks: each chunk was flushed on its own", n)
	}
}

// TestStreamQuietProviderNothingHeld: chunks the provider sent before a
// pause reach the client during the pause; the provider goes on only once
// the client has them (a gateway that held them back waiting for more would
// never finish).
func TestStreamQuietProviderNothingHeld(t *testing.T) {
	clientHas := make(chan struct{})
	url, _ := streamGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkEvent("one ")+chunkEvent("two "))
		http.NewResponseController(w).Flush()
		select {
		case <-clientHas:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, chunkEvent("three")+streamEnd)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/chat/completions", strings.NewReader(chatBody(`"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var once sync.Once
	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		got.WriteString(sc.Text() + "\n")
		if strings.Contains(got.String(), `"two "`) {
			once.Do(func() { close(clientHas) })
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("the stream broke (held back until the deadline?): %v\n%s", err, got.String())
	}
	for _, w := range []string{`"one "`, `"two "`, `"three"`, "data: [DONE]"} {
		if !strings.Contains(got.String(), w) {
			t.Errorf("%s missing:\n%s", w, got.String())
		}
	}
}

// TestStreamHeadersLeaveWithFirstEvent: a stream's status line and headers
// reach the client in the same write as its first event (the router answers
// once the provider's output began, so that event is at hand), keyed or not.
func TestStreamHeadersLeaveWithFirstEvent(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			url, cl := streamGatewayListener(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, chunkEvent("one ")+streamEnd)
			}))
			var header []string
			if keyed {
				header = []string{"Idempotency-Key", "first-event-" + fmt.Sprint(time.Now().UnixNano())}
			}
			resp := postTo(t, url, chatBody(`"stream":true`), header...)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"one "`) {
				t.Fatalf("%d %v\n%s", resp.StatusCode, err, body)
			}
			cl.mu.Lock()
			conns := cl.conns
			cl.mu.Unlock()
			if len(conns) != 1 || conns[0].first.Load() == nil {
				t.Fatalf("%d connections to the gateway", len(conns))
			}
			first := string(*conns[0].first.Load())
			if !strings.HasPrefix(first, "HTTP/1.1 200") || !strings.Contains(first, `"one "`) {
				t.Errorf("the first write does not carry both the headers and the first event:\n%s", first)
			}
		})
	}
}
