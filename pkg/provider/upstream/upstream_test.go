package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		ms, s string
		want  time.Duration
	}{
		{"", "", 0},
		{"250", "", 250 * time.Millisecond},
		{"12.5", "", 12500 * time.Microsecond},
		{"90000", "", 60 * time.Second},
		{"1e300", "", 60 * time.Second},
		{"NaN", "", 0},
		{"-5", "3", 3 * time.Second},
		{"junk", "3", 3 * time.Second},
		{"", "0", 0},
		{"", "-1", 0},
		{"", "1.5", 1500 * time.Millisecond},
		{"", now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{"", now.Add(-10 * time.Second).Format(http.TimeFormat), 0},
		{"", now.Add(time.Hour).Format(http.TimeFormat), 60 * time.Second},
		{"", "soon", 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.ms != "" {
			h.Set("retry-after-ms", tt.ms)
		}
		if tt.s != "" {
			h.Set("retry-after", tt.s)
		}
		if got := RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(ms=%q, s=%q) = %v, want %v", tt.ms, tt.s, got, tt.want)
		}
	}
}

func TestPlainText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  hi  ", "hi"},
		{"a\nb", "a b"},
		{"\x00\x01\x7f", ""},
		{"ok\xff\xfe", "ok"},
		{"\u0085x", "x"}, // C1 control (NEL) as space, trimmed
		{"\u009bx", "x"}, // C1 control removed
		{"日本語", "日本語"},   // multi-byte text kept
	}
	for _, tt := range tests {
		if got := PlainText([]byte(tt.in), 512); got != tt.want {
			t.Errorf("PlainText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := PlainText([]byte("ab日"), 4); got != "ab" {
		t.Errorf("rune cut at the limit: got %q, want %q", got, "ab")
	}
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		base, want string
		bad        bool
	}{
		{"https://api.example.com/v1/", "https://api.example.com/v1/chat", false},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/chat", false},
		{"ftp://example.com", "", true},
		{"/v1", "", true},
		{"http://[::1", "", true},
	} {
		got, err := Endpoint(tc.base, "/chat")
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("Endpoint(%q) = %q, %v", tc.base, got, err)
		}
	}
}

func TestHTTPClientNeverFollowsRedirects(t *testing.T) {
	mine := &http.Client{Timeout: time.Second}
	for _, c := range []*http.Client{HTTPClient(nil), HTTPClient(mine)} {
		if c.CheckRedirect == nil || c.CheckRedirect(nil, nil) != http.ErrUseLastResponse {
			t.Errorf("a client that follows redirects: %+v", c)
		}
	}
	if mine.CheckRedirect != nil || HTTPClient(mine).Timeout != time.Second {
		t.Error("HTTPClient changed the caller's client, or dropped its settings")
	}
}

// Send answers as the client's Do would: one request, a redirect handed
// back as it is, errors wrapped as Do wraps them; and it leaves a client
// with a cookie jar, a timeout, or a URL with user info to Do itself.
func TestSend(t *testing.T) {
	var calls, redirected atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/target", http.StatusTemporaryRedirect)
		case "/target":
			redirected.Add(1)
		case "/cookie":
			http.SetCookie(w, &http.Cookie{Name: "c", Value: "1"})
		case "/echo":
			c, _ := r.Cookie("c")
			user, pass, _ := r.BasicAuth()
			fmt.Fprintf(w, "cookie=%v user=%s:%s", c != nil, user, pass)
		case "/slow":
			<-release
		}
	}))
	defer srv.Close()
	defer close(release)
	send := func(c *http.Client, u string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := Send(c, req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b), nil
	}

	plain := HTTPClient(nil) // the adapters' shared client
	resp, _, err := send(plain, srv.URL+"/redirect")
	if err != nil || resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/target" {
		t.Fatalf("redirect: %v %+v", err, resp)
	}
	if n, r := calls.Load(), redirected.Load(); n != 1 || r != 0 {
		t.Errorf("upstream calls %d, redirect target called %d times; want 1 and 0", n, r)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1"
	l.Close()
	_, _, err = send(plain, closed)
	var ue *url.Error
	if !errors.As(err, &ue) || ue.Op != "Post" || ue.URL != closed {
		t.Errorf("connection refused: %#v, want a *url.Error for Post %s", err, closed)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	withJar := HTTPClient(&http.Client{Jar: jar})
	if _, _, err := send(withJar, srv.URL+"/cookie"); err != nil {
		t.Fatal(err)
	}
	if _, body, err := send(withJar, srv.URL+"/echo"); err != nil || body != "cookie=true user=:" {
		t.Errorf("a client with a jar: %q %v, want its cookie sent", body, err)
	}
	u, _ := url.Parse(srv.URL)
	u.User, u.Path = url.UserPassword("u", "p"), "/echo"
	if _, body, err := send(plain, u.String()); err != nil || body != "cookie=false user=u:p" {
		t.Errorf("a URL with user info: %q %v, want basic auth sent", body, err)
	}
	noHeader, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/echo", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	noHeader.Header = nil
	// net/http's Transport refuses a nil header; Do makes one.
	if resp, err := Send(HTTPClient(&http.Client{Transport: newTransport()}), noHeader); err != nil {
		t.Errorf("a request without a header: %v, want it sent as Do sends it", err)
	} else {
		resp.Body.Close()
	}
	withTimeout := HTTPClient(&http.Client{Timeout: 50 * time.Millisecond})
	if _, _, err := send(withTimeout, srv.URL+"/slow"); !errors.As(err, &ue) || !ue.Timeout() {
		t.Errorf("a client with a timeout: %v, want its timeout", err)
	}
}

// TestNewRequest: the pieces reach the upstream in order as one body with
// its Content-Length, twice from one request (GetBody), and the pieces
// themselves are left as they were.
func TestNewRequest(t *testing.T) {
	var got []string
	var lengths []int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
		lengths = append(lengths, r.ContentLength)
	}))
	defer srv.Close()
	big := strings.Repeat("z", 1<<20)
	pieces := [][]byte{[]byte(`{"a":`), []byte(`"` + big + `"`), []byte(`,"b":1}`)}
	want := `{"a":"` + big + `","b":1}`
	req, err := NewRequest(t.Context(), srv.URL, pieces)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Send(srv.Client(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	again, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	req2, _ := NewRequest(t.Context(), srv.URL, nil)
	req2.Body, req2.ContentLength = again, req.ContentLength
	if resp, err = Send(srv.Client(), req2); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("the upstream received %d bodies; first %.40q…", len(got), got)
	}
	if lengths[0] != int64(len(want)) {
		t.Errorf("Content-Length %d, want %d", lengths[0], len(want))
	}
	if string(pieces[0]) != `{"a":` || len(pieces[1]) != len(big)+2 || string(pieces[2]) != `,"b":1}` {
		t.Error("sending changed the pieces")
	}
}

// countingConn passes its writes on and records their sizes.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes []int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// TestNewRequestSmallBodyOneWrite: a body of at most joinedBody bytes,
// in one piece or several, goes out with the request's head in one write;
// a larger one as its head and then its pieces, each written as it is.
func TestNewRequestSmallBodyOneWrite(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
	}))
	defer srv.Close()
	big := bytes.Repeat([]byte("x"), joinedBody)
	for _, c := range []struct {
		name   string
		pieces [][]byte
		writes int
	}{
		{"one piece", [][]byte{[]byte(`{"model":"m"}`)}, 1},
		{"pieces", [][]byte{[]byte(`{"model":`), []byte(`"m"`), []byte(`}`)}, 1},
		{"at the bound", [][]byte{big[:joinedBody-8], []byte(`{"a":1}`), []byte(` `)}, 2}, // the head fills the buffer
		{"over the bound", [][]byte{[]byte(`{"a":"`), big, []byte(`"}`)}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := &countingConn{}
			tr := newTransport()
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				conn.Conn = nc
				return bodyConn{conn}, nil
			}
			defer tr.CloseIdleConnections()
			got = nil
			req, err := NewRequest(t.Context(), srv.URL, c.pieces)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := Send(&http.Client{Transport: tr}, req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			want := string(bytes.Join(c.pieces, nil))
			if len(got) != 1 || got[0] != want {
				t.Errorf("the upstream received %.40q, want %.40q", got, want)
			}
			conn.mu.Lock()
			defer conn.mu.Unlock()
			if len(conn.writes) != c.writes {
				t.Errorf("the request took %d writes (%v), want %d", len(conn.writes), conn.writes, c.writes)
			}
		})
	}
}

// TestNewRequestURL: NewRequest's URL and Host are http.NewRequest's, the
// second time as the first (the URL is parsed once), and a request's URL
// is its own.
func TestNewRequestURL(t *testing.T) {
	for _, u := range []string{
		"http://127.0.0.1:8080/v1/chat/completions",
		"https://api.example.com/v1/messages?beta=true",
		"http://host:/path",
		"http://[::1]:/p",
		"http://user:pw@host/p",
		"://no-scheme",
		"http://bad\x7f/",
	} {
		want, wantErr := http.NewRequestWithContext(t.Context(), http.MethodPost, u, nil)
		for range 2 {
			got, err := NewRequest(t.Context(), u, [][]byte{[]byte("{}")})
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("NewRequest(%q): error %v, want %v", u, err, wantErr)
			}
			if err != nil {
				if err.Error() != wantErr.Error() {
					t.Errorf("NewRequest(%q): error %q, want %q", u, err, wantErr)
				}
				continue
			}
			g, w := *got.URL, *want.URL
			g.User, w.User = nil, nil // equal by String
			if g != w || got.URL.String() != want.URL.String() || got.Host != want.Host || got.Method != want.Method {
				t.Errorf("NewRequest(%q): %s %#v host %q, want %s %#v host %q", u, got.Method, got.URL, got.Host, want.Method, want.URL, want.Host)
			}
			got.URL.Path = "/changed"
		}
	}
}

// BenchmarkNewRequest is an adapter's request of a small body in pieces.
func BenchmarkNewRequest(b *testing.B) {
	pieces := [][]byte{[]byte(`{"model":"x",`), []byte(`"messages":[]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRequest(b.Context(), "http://127.0.0.1:8080/v1/chat/completions", pieces); err != nil {
			b.Fatal(err)
		}
	}
}
