package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/testclock"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// answer is a whole HTTP answer as a client saw it.
type answer struct {
	status   int
	body     string
	reqID    string
	provider string
	depth    string
	replayed string
	code     string
	header   http.Header
	err      error
}

// call sends one chat completion; it is safe in any goroutine.
func call(ctx context.Context, url, body string, header ...string) answer {
	return callURL(ctx, url+"/api/v1/chat/completions", body, header...)
}

// callPath posts body to a full URL (another endpoint than chat completions).
func callPath(t *testing.T, url, body string, header ...string) answer {
	t.Helper()
	a := callURL(context.Background(), url, body, header...)
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a
}

func callURL(ctx context.Context, url, body string, header ...string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a := answer{
		status: resp.StatusCode, body: string(b), err: err, header: resp.Header,
		reqID: resp.Header.Get("X-Request-Id"), provider: resp.Header.Get("X-Gateway-Provider"),
		depth: resp.Header.Get("X-Gateway-Route-Depth"), replayed: resp.Header.Get("Idempotency-Replayed"),
	}
	if resp.StatusCode >= 400 {
		var e apiError
		json.Unmarshal(b, &e)
		a.code = e.Error.Code
	}
	return a
}

func mustCall(t *testing.T, url, body string, header ...string) answer {
	t.Helper()
	a := call(context.Background(), url, body, header...)
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a
}

func sameAnswer(t *testing.T, first, again answer) {
	t.Helper()
	if again.status != first.status || again.body != first.body || again.reqID != first.reqID ||
		again.provider != first.provider || again.depth != first.depth {
		t.Errorf("the retry's answer differs from the first:\nfirst %d %s %s %s %q\nretry %d %s %s %s %q",
			first.status, first.reqID, first.provider, first.depth, first.body, again.status, again.reqID, again.provider, again.depth, again.body)
	}
	if again.replayed != "true" {
		t.Errorf("Idempotency-Replayed = %q on a retry, want true", again.replayed)
	}
}

func key(t *testing.T) string { return "key-" + strings.ReplaceAll(t.Name(), "/", "-") }

func TestIdempotentReplay(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			g := newGateway(t, setup{})
			g.ups[0].SetDefault(providertest.Response{Status: 500})
			body := chatBody(fmt.Sprintf(`"stream":%v`, stream))
			first := mustCall(t, g.url, body, "Idempotency-Key", key(t))
			if first.status != 200 || first.replayed != "" || first.provider != "p1" {
				t.Fatalf("first call: %d replayed=%q provider %q", first.status, first.replayed, first.provider)
			}
			again := mustCall(t, g.url, body, "Idempotency-Key", key(t))
			sameAnswer(t, first, again)
			if diff := cmp.Diff([]int{1, 1}, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got): the retry ran again\n%s", diff)
			}
			// Another key is another request.
			other := mustCall(t, g.url, body, "Idempotency-Key", key(t)+"-2")
			if other.reqID == first.reqID || other.replayed != "" {
				t.Errorf("another key was replayed")
			}
		})
	}
}

func TestIdempotentReplayIncludeUsage(t *testing.T) {
	g := newGateway(t, setup{})
	plain := chatBody(`"stream":true`)
	withUsage := chatBody(`"stream":true,"stream_options":{"include_usage":true}`)
	first := mustCall(t, g.url, plain, "Idempotency-Key", key(t))
	if strings.Contains(first.body, `"usage":{`) {
		t.Fatalf("the first stream has a usage chunk it did not ask for: %s", first.body)
	}
	// The same key and body but include_usage: not a conflict, and the
	// replay adds the usage chunk, with the original cost.
	again := mustCall(t, g.url, withUsage, "Idempotency-Key", key(t))
	if again.status != 200 || again.replayed != "true" || again.reqID != first.reqID {
		t.Fatalf("retry with include_usage: %d %q %q", again.status, again.replayed, again.body)
	}
	if !strings.Contains(again.body, `"cost":0.000014`) {
		t.Errorf("replay with include_usage lacks the usage chunk: %s", again.body)
	}
	if strings.Replace(again.body, usageEvent(again.body), "", 1) != first.body {
		t.Errorf("the replay is not the first stream plus the usage chunk:\nfirst %q\nretry %q", first.body, again.body)
	}
	// And dropped again.
	third := mustCall(t, g.url, plain, "Idempotency-Key", key(t))
	if third.body != first.body {
		t.Errorf("replay without include_usage differs:\n%q\n%q", first.body, third.body)
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

// usageEvent finds the SSE event that carries usage in an SSE body.
func usageEvent(body string) string {
	for _, ev := range strings.SplitAfter(body, "\n\n") {
		if strings.Contains(ev, `"usage":{`) {
			return ev
		}
	}
	return ""
}

func TestIdempotencyConflict(t *testing.T) {
	g := newGateway(t, setup{})
	base := `{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5}`
	first := mustCall(t, g.url, base, "Idempotency-Key", key(t))
	if first.status != 200 {
		t.Fatal(first.status)
	}
	same := []string{
		"{\n  \"temperature\": 0.5,\n  \"messages\": [{\"content\":\"Say hello\",\"role\":\"user\"}],\n  \"model\": \"m\"\n}",
		`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.50,"stream_options":{"include_usage":false}}`,
	}
	for _, b := range same {
		if a := mustCall(t, g.url, b, "Idempotency-Key", key(t)); a.status != 200 || a.replayed != "true" || a.body != first.body {
			t.Errorf("the same request re-serialized (%s) was not replayed: %d %s", b, a.status, a.body)
		}
	}
	different := []string{
		`{"model":"m","messages":[{"role":"user","content":"Say hello!"}],"temperature":0.5}`,
		`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.6}`,
		`{"model":"m:floor","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5}`,
		`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5,"stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5,"stream":false}`,
		`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5,"gateway":{"retry":{"max_total_attempts":2}}}`,
		`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5,"provider":{"sort":"price"}}`,
		`{"model":"m","messages":[{"role":"user","content":"Say hello"}],"temperature":0.5,"seed":12345678901234567891}`,
	}
	for _, b := range different {
		a := mustCall(t, g.url, b, "Idempotency-Key", key(t))
		if a.status != 409 || a.code != "idempotency_conflict" || a.header.Get("X-Should-Retry") != "false" {
			t.Errorf("changed request %s: %d %q x-should-retry %q, want 409 idempotency_conflict", b, a.status, a.code, a.header.Get("X-Should-Retry"))
		}
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

func TestIdempotencyScope(t *testing.T) {
	g := newGateway(t, setup{})
	body := chatBody("")
	first := mustCall(t, g.url, body, "Idempotency-Key", key(t))
	// The same Idempotency-Key under another API key, another project, or
	// another data-policy demand is another record: it runs and bills anew.
	for _, h := range [][]string{
		{"Idempotency-Key", key(t), "Authorization", "Bearer " + otherKey},
		{"Idempotency-Key", key(t), "Authorization", "Bearer " + otherProjectKey},
	} {
		a := mustCall(t, g.url, body, h...)
		if a.status != 200 || a.replayed != "" || a.reqID == first.reqID {
			t.Errorf("%v: %d replayed=%q: another caller's key must not replay this one's answer", h[3], a.status, a.replayed)
		}
	}
	zdr := mustCall(t, g.url, chatBody(`"provider":{"zdr":false}`), "Idempotency-Key", key(t))
	if zdr.status != 409 {
		t.Errorf("a changed provider object under the same demand is a conflict; got %d", zdr.status)
	}
	if diff := cmp.Diff([]int{3, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
	// A zero-retention demand is another record, even with this key.
	if a := mustCall(t, g.url, chatBody(`"provider":{"zdr":true,"only":["p0","p1"]}`), "Idempotency-Key", key(t)); a.code == "idempotency_conflict" {
		t.Errorf("another data-policy demand was treated as the same record: %d %q", a.status, a.code)
	}
	// Client request ids and session ids never act as a key.
	for _, h := range []string{"X-Client-Request-Id", "X-Session-Id"} {
		a1 := mustCall(t, g.url, body, h, "same")
		a2 := mustCall(t, g.url, body, h, "same")
		if a1.replayed != "" || a2.replayed != "" || a1.reqID == a2.reqID {
			t.Errorf("%s acted as an idempotency key", h)
		}
	}
}

func TestIdempotencyTombstone(t *testing.T) {
	tests := []struct {
		name   string
		script func(g *gateway)
		body   string
		status int
		calls  []int
	}{
		{"502 all providers failed", func(g *gateway) {
			g.ups[0].SetDefault(providertest.Response{Status: 500})
			g.ups[1].SetDefault(providertest.Response{Status: 500})
		}, chatBody(""), 502, []int{1, 1}},
		{"provider's own 400", func(g *gateway) {
			g.ups[0].SetDefault(providertest.Response{Status: 400})
		}, chatBody(""), 400, []int{1, 0}},
		{"429 unavailable_route", func(g *gateway) {
			g.ups[0].SetDefault(providertest.Response{Status: 429})
			g.ups[1].SetDefault(providertest.Response{Status: 429})
		}, chatBody(`"gateway":{"retry":{"backoff":0,"max_attempts_per_route":1}}`), 429, []int{1, 1}},
		{"503 no provider meets the policy", func(g *gateway) {}, chatBody(`"provider":{"zdr":true}`), 503, []int{0, 0}},
		{"non-streaming failure after output", func(g *gateway) {
			g.ups[0].SetDefault(providertest.Response{Text: []string{"a", "b"}, Cut: &providertest.Cut{After: 1, How: providertest.CutError}})
		}, chatBody(""), 502, []int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, setup{})
			tt.script(g)
			first := mustCall(t, g.url, tt.body, "Idempotency-Key", key(t))
			if first.status != tt.status {
				t.Fatalf("first call %d %s, want %d", first.status, first.body, tt.status)
			}
			for i := 0; i < 2; i++ {
				a := mustCall(t, g.url, tt.body, "Idempotency-Key", key(t))
				if a.status != 409 || a.code != "idempotency_replay_unavailable" || a.header.Get("X-Should-Retry") != "false" {
					t.Errorf("retry %d: %d %q, want 409 idempotency_replay_unavailable", i, a.status, a.code)
				}
			}
			if diff := cmp.Diff(tt.calls, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got): a retry ran again\n%s", diff)
			}
		})
	}
}

// TestIdempotencyRefusedStoresNothing: a request refused before it was
// accepted leaves no record, and the same key then runs normally.
func TestIdempotencyRefusedStoresNothing(t *testing.T) {
	g := newGateway(t, setup{extraYAML: "server: {max_body_bytes: 4096}\n"})
	k := key(t)
	refusals := []struct {
		body   string
		header []string
		status int
	}{
		{`{"model":"m","messages":[]}`, nil, 400},
		{chatBody(""), []string{"Authorization", "Bearer sk-wrong-key-1234"}, 401},
		{`{"model":"nope","messages":[{"role":"user"}]}`, nil, 404},
		{chatBody(`"pad":"` + strings.Repeat("x", 5000) + `"`), nil, 413},
	}
	for _, r := range refusals {
		a := mustCall(t, g.url, r.body, append([]string{"Idempotency-Key", k}, r.header...)...)
		if a.status != r.status {
			t.Fatalf("refusal: %d, want %d", a.status, r.status)
		}
	}
	a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", k)
	if a.status != 200 || a.replayed != "" {
		t.Errorf("after refusals the key did not run normally: %d replayed=%q", a.status, a.replayed)
	}
	if long := mustCall(t, g.url, chatBody(""), "Idempotency-Key", strings.Repeat("k", idempotency.MaxKeyLength+1)); long.status != 400 || long.code != "invalid_request" {
		t.Errorf("an absurdly long key: %d %q", long.status, long.code)
	}
}

func TestIdempotencyTooLargeToStore(t *testing.T) {
	g := newGateway(t, setup{extraYAML: "idempotency: {max_response_bytes: 1000}\n"})
	g.ups[0].SetDefault(providertest.Response{PadBytes: 2000})
	first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
	again := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
	if first.status != 200 || again.status != 200 || again.replayed != "" || again.reqID == first.reqID {
		t.Errorf("an answer over max_response_bytes is not stored and a retry runs again: %d %d replayed=%q", first.status, again.status, again.replayed)
	}
	if diff := cmp.Diff([]int{2, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

func TestIdempotencyWindow(t *testing.T) {
	// The gateway's clock moves only when the test says so.
	clock := testclock.New(time.Now())
	g := newGateway(t, setup{now: clock.Now, extraYAML: "idempotency: {window: 1h}\n"})
	first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
	if a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t)); a.replayed != "true" || a.reqID != first.reqID {
		t.Fatalf("within the window: replayed=%q", a.replayed)
	}
	clock.Advance(time.Hour - time.Second)
	if a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t)); a.replayed != "true" || a.reqID != first.reqID {
		t.Fatalf("at the end of the window: replayed=%q", a.replayed)
	}
	clock.Advance(2 * time.Second)
	a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
	if a.status != 200 || a.replayed != "" || a.reqID == first.reqID {
		t.Errorf("after the window the key is new again: %d replayed=%q", a.status, a.replayed)
	}
	if diff := cmp.Diff([]int{2, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

// TestIdempotencyWaitsForTheFirstCall: retries that arrive while the first
// call runs wait for it and get its answer; with a short max_wait they get
// 409 idempotency_in_progress instead.
func TestIdempotencyWaitsForTheFirstCall(t *testing.T) {
	g := newGateway(t, setup{})
	g.ups[0].SetDefault(providertest.Response{FirstChunkDelay: 300 * time.Millisecond})
	firstc := make(chan answer, 1)
	go func() { firstc <- call(context.Background(), g.url, chatBody(""), "Idempotency-Key", key(t)) }()
	waitCalls(t, g.ups[0], 1)
	again := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
	first := <-firstc
	if first.err != nil || first.status != 200 {
		t.Fatalf("first: %v %d", first.err, first.status)
	}
	sameAnswer(t, first, again)

	g2 := newGateway(t, setup{extraYAML: "idempotency: {max_wait: 100ms}\n"})
	// The first call runs until released, however long the retry takes.
	release := holdFirstCall(t, g2.ups[0])
	go func() { firstc <- call(context.Background(), g2.url, chatBody(""), "Idempotency-Key", key(t)) }()
	waitCalls(t, g2.ups[0], 1)
	// Bounded: were max_wait not kept, the retry would wait for the held call.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := call(ctx, g2.url, chatBody(""), "Idempotency-Key", key(t))
	if a.err != nil {
		t.Fatalf("a waiter past max_wait got no answer: %v", a.err)
	}
	if a.status != 409 || a.code != "idempotency_in_progress" || a.header.Get("Retry-After") == "" {
		t.Errorf("a waiter past max_wait: %d %q retry-after %q", a.status, a.code, a.header.Get("Retry-After"))
	}
	release()
	if first := <-firstc; first.err != nil || first.status != 200 {
		t.Fatalf("first: %v %d", first.err, first.status)
	}
	if a := mustCall(t, g2.url, chatBody(""), "Idempotency-Key", key(t)); a.status != 200 || a.replayed != "true" {
		t.Errorf("after the first call finished: %d replayed=%q", a.status, a.replayed)
	}
	if diff := cmp.Diff([]int{1, 0}, g2.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

func waitCalls(t *testing.T, up *providertest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for up.Calls() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream got %d calls, want %d", up.Calls(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestIdempotencyJoinsAStream: a retry of a keyed stream that is still
// running gets everything so far and then the rest live, byte for byte.
func TestIdempotencyJoinsAStream(t *testing.T) {
	for _, instances := range []int{1, 2} {
		t.Run(fmt.Sprintf("instances=%d", instances), func(t *testing.T) {
			store := memstore.New(1 << 30)
			g := newGateway(t, setup{store: store})
			url2 := g.url
			if instances == 2 {
				url2 = g.instance(t, store)
			}
			g.ups[0].SetDefault(providertest.Response{Text: []string{"a", "b", "c", "d", "e", "f"}, ChunkDelay: 120 * time.Millisecond})
			body := chatBody(`"stream":true,"stream_options":{"include_usage":true}`)
			firstc := make(chan answer, 1)
			go func() { firstc <- call(context.Background(), g.url, body, "Idempotency-Key", key(t)) }()
			waitCalls(t, g.ups[0], 1)
			time.Sleep(200 * time.Millisecond) // a few chunks are out
			joined := mustCall(t, url2, body, "Idempotency-Key", key(t))
			first := <-firstc
			if first.err != nil || first.status != 200 || !strings.HasSuffix(first.body, "data: [DONE]\n\n") {
				t.Fatalf("first: %v %d %q", first.err, first.status, first.body)
			}
			sameAnswer(t, first, joined)
			if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIdempotencyClientGone: a keyed request goes on when its client
// disconnects, stores its answer, and a retry gets it; the upstream is
// called once.
func TestIdempotencyClientGone(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			g := newGateway(t, setup{})
			g.ups[0].SetDefault(providertest.Response{Text: []string{"one", " two", " three"}, ChunkDelay: 100 * time.Millisecond})
			body := chatBody(fmt.Sprintf(`"stream":%v`, stream))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan answer, 1)
			go func() { done <- call(ctx, g.url, body, "Idempotency-Key", key(t)) }()
			waitCalls(t, g.ups[0], 1)
			time.Sleep(50 * time.Millisecond)
			cancel()
			<-done
			again := mustCall(t, g.url, body, "Idempotency-Key", key(t))
			if again.status != 200 || again.replayed != "true" || !strings.Contains(again.body, "three") {
				t.Errorf("retry after the client left: %d replayed=%q %q", again.status, again.replayed, again.body)
			}
			if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIdempotencyLapsedLease: a reservation whose owner died (no heartbeat,
// lease lapsed) after it started (it may have called a provider) is never
// run again: a retry answers 409 idempotency_replay_unavailable and no
// provider is called. One that never started is taken over by the retry,
// which runs it once.
func TestIdempotencyLapsedLease(t *testing.T) {
	for _, started := range []bool{true, false} {
		t.Run(fmt.Sprintf("started=%v", started), func(t *testing.T) { testLapsedLease(t, started) })
	}
}

func testLapsedLease(t *testing.T, started bool) {
	store := memstore.New(1 << 20)
	g := newGateway(t, setup{store: store})
	// Find the record key the gateway will use, by letting it reserve one
	// under a different key first? No: build it as the gateway does.
	h := sha256Key(testKey)
	ident := idempotency.Identity("proj", h, key(t), "none", "anywhere")
	fp, err := idempotency.Fingerprint("POST", "/api/v1/chat/completions", []byte(chatBody("")))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	dead := &idempotency.Record{Key: ident, Fingerprint: fp, State: idempotency.StateInProgress, Owner: "dead-owner",
		LeaseUntil: now.Add(50 * time.Millisecond), ExpiresAt: now.Add(time.Hour), RequestID: "req_dead", Tenant: "proj"}
	if existing, err := store.Reserve(context.Background(), dead, now); err != nil || existing != nil {
		t.Fatalf("reserve: %v %v", existing, err)
	}
	if started {
		if err := store.MarkStarted(context.Background(), ident, "dead-owner"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if !started {
		first := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
		again := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
		if first.status != 200 || first.replayed != "" || again.replayed != "true" || again.reqID != first.reqID {
			t.Errorf("a never-started reservation: first %d replayed=%q, again replayed=%q", first.status, first.replayed, again.replayed)
		}
		if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
			t.Errorf("upstream calls (-want +got):\n%s", diff)
		}
		return
	}
	for i := 0; i < 3; i++ {
		a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
		if a.status != 409 || a.code != "idempotency_replay_unavailable" {
			t.Errorf("retry of a dead owner's key: %d %q", a.status, a.code)
		}
	}
	if diff := cmp.Diff([]int{0, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got): a dead owner's request ran again\n%s", diff)
	}
}

// failingStore is a store that cannot be reached.
type failingStore struct{ idempotency.Store }

var errDown = fmt.Errorf("%w: connection refused", idempotency.ErrUnavailable)

func (failingStore) Reserve(context.Context, *idempotency.Record, time.Time) (*idempotency.Record, error) {
	return nil, errDown
}

func (failingStore) Release(context.Context, string, string) error { return errDown }

func TestIdempotencyStoreUnavailable(t *testing.T) {
	emf := &syncBuffer{}
	g := newGateway(t, setup{store: failingStore{}, metrics: emf})
	a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t))
	if a.status != 503 || a.code != "idempotency_store_unavailable" {
		t.Errorf("keyed request with the store down: %d %q", a.status, a.code)
	}
	if !strings.Contains(emf.String(), `"IdempotencyStoreErrors":1`) {
		t.Errorf("no IdempotencyStoreErrors metric for the store failure: %s", emf.String())
	}
	if b := mustCall(t, g.url, chatBody("")); b.status != 200 {
		t.Errorf("unkeyed request with the store down: %d", b.status)
	}
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
	if !strings.Contains(g.logs.String(), "idempotency store unavailable") {
		t.Error("no warning in the log")
	}
}

// TestIdempotencyRace: 100 goroutines send the same keyed request at once,
// over one or two gateway instances sharing a store, to a slow upstream:
// exactly one upstream call, and every client gets the same answer.
func TestIdempotencyRace(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, instances := range []int{1, 2} {
			t.Run(fmt.Sprintf("stream=%v/instances=%d", stream, instances), func(t *testing.T) {
				store := memstore.New(1 << 30)
				raceOneKey(t, store, instances, stream)
			})
		}
	}
}

func raceOneKey(t *testing.T, store idempotency.Store, instances int, stream bool) {
	g := newGateway(t, setup{store: store})
	urls := []string{g.url}
	for len(urls) < instances {
		urls = append(urls, g.instance(t, store))
	}
	g.ups[0].SetDefault(providertest.Response{Text: []string{"slow", " answer"}, FirstChunkDelay: 200 * time.Millisecond, ChunkDelay: 50 * time.Millisecond})
	body := chatBody(fmt.Sprintf(`"stream":%v`, stream))
	const n = 100
	answers := make([]answer, n)
	hist := &history{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			begin := time.Now()
			answers[i] = call(context.Background(), urls[i%len(urls)], body, "Idempotency-Key", key(t))
			hist.add(i, begin, time.Now(), answers[i])
		}(i)
	}
	close(start)
	wg.Wait()
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Fatalf("upstream calls (-want +got):\n%s", diff)
	}
	if err := hist.check(); err != nil {
		t.Fatal(err)
	}
}

// history records the keyed calls of a test and checks the exactly-once
// invariants on it: every call answered, all with one and the same answer
// (same x-request-id, same body), exactly one produced it (no
// Idempotency-Replayed) and every other one says it is replayed; and, as a
// linearizability check, the one that produced it started before any
// replayed answer ended.
type history struct {
	mu  sync.Mutex
	ops []op
}

type op struct {
	client     int
	begin, end time.Time
	a          answer
}

func (h *history) add(client int, begin, end time.Time, a answer) {
	h.mu.Lock()
	h.ops = append(h.ops, op{client, begin, end, a})
	h.mu.Unlock()
}

func (h *history) check() error {
	var producers []op
	var want *answer
	for i := range h.ops {
		o := &h.ops[i]
		if o.a.err != nil || o.a.status != 200 {
			return fmt.Errorf("client %d: %v %d %s", o.client, o.a.err, o.a.status, o.a.body)
		}
		if want == nil {
			want = &o.a
		}
		if o.a.reqID != want.reqID || o.a.body != want.body {
			return fmt.Errorf("client %d got another answer: %s %q vs %s %q", o.client, o.a.reqID, o.a.body, want.reqID, want.body)
		}
		if o.a.replayed == "" {
			producers = append(producers, *o)
		}
	}
	if len(producers) != 1 {
		return fmt.Errorf("%d calls produced the answer themselves, want exactly 1", len(producers))
	}
	for _, o := range h.ops {
		if o.a.replayed != "" && o.end.Before(producers[0].begin) {
			return fmt.Errorf("client %d got the answer before its producer started", o.client)
		}
	}
	return linearizable(h.ops)
}

// TestIdempotencyRoom: the memory store drops old answers to make room, but
// keeps their records: a retry of a dropped answer answers 409
// idempotency_replay_unavailable and does not run again.
func TestIdempotencyRoom(t *testing.T) {
	g := newGateway(t, setup{store: memstore.New(8 << 10)})
	g.ups[0].SetDefault(providertest.Response{PadBytes: 3000})
	for i := 0; i < 6; i++ {
		if a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", fmt.Sprintf("%s-%d", key(t), i)); a.status != 200 {
			t.Fatalf("call %d: %d", i, a.status)
		}
	}
	old := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t)+"-0")
	if old.status != 409 || old.code != "idempotency_replay_unavailable" {
		t.Errorf("retry of a dropped answer: %d %q", old.status, old.code)
	}
	recent := mustCall(t, g.url, chatBody(""), "Idempotency-Key", key(t)+"-5")
	if recent.status != 200 || recent.replayed != "true" {
		t.Errorf("retry of a recent answer: %d replayed=%q", recent.status, recent.replayed)
	}
	if diff := cmp.Diff([]int{6, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

// reserveSignal is a store that tells when Reserve found another request's
// record: the request that called it is about to wait for that one.
type reserveSignal struct {
	idempotency.Store
	found chan struct{}
}

func newReserveSignal(s idempotency.Store) *reserveSignal {
	return &reserveSignal{Store: s, found: make(chan struct{}, 1)}
}

func (s *reserveSignal) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	existing, err := s.Store.Reserve(ctx, rec, now)
	if err == nil && existing != nil {
		select {
		case s.found <- struct{}{}:
		default:
		}
	}
	return existing, err
}

// TestWaiterGivesBackItsSlot: a retry waiting for the first call of its key
// does not hold an admission slot, so other requests still get in.
func TestWaiterGivesBackItsSlot(t *testing.T) {
	store := newReserveSignal(memstore.New(1 << 30))
	g := newGateway(t, setup{store: store, extraYAML: "server: {max_in_flight: 2}\n"})
	// The first call holds its slot until released.
	release := holdFirstCall(t, g.ups[0])
	firstc := make(chan answer, 1)
	go func() { firstc <- call(context.Background(), g.url, chatBody(""), "Idempotency-Key", key(t)) }()
	waitCalls(t, g.ups[0], 1)
	waiterc := make(chan answer, 1)
	go func() { waiterc <- call(context.Background(), g.url, chatBody(""), "Idempotency-Key", key(t)) }()
	select {
	case <-store.found: // the waiter found the first call's record
	case w := <-waiterc:
		t.Fatalf("the retry ended before the first call did: %v %d %s", w.err, w.status, w.body)
	case <-time.After(10 * time.Second):
		t.Fatal("the retry never found the first call's record")
	}
	// The waiter gives its slot back right after that: until it has, a new
	// request is refused (both slots taken). Were it kept, every attempt
	// would be refused, the first call being held.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := call(ctx, g.url, chatBody(`"n":1`))
		if a.err != nil {
			t.Fatalf("a new request while one runs and one waits: %v", a.err)
		}
		if a.status == 200 {
			break
		}
		if a.status != 429 || time.Now().After(deadline) {
			t.Fatalf("a new request while one runs and one waits: %d %q", a.status, a.code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case w := <-waiterc:
		t.Fatalf("the retry ended before the first call did: %v %d %s", w.err, w.status, w.body)
	default: // still waiting
	}
	release()
	first, waiter := <-firstc, <-waiterc
	if first.err != nil || first.status != 200 {
		t.Fatalf("first: %v %d", first.err, first.status)
	}
	sameAnswer(t, first, waiter)
}

// TestResponsesReplayOutlivesPreviousTurn: a keyed Responses request that
// continued a conversation (previous_response_id) answered; a retry with its
// key and body, still inside the key's window, gets the stored answer,
// though the turn it continued, kept earlier, is gone by then. The kept turn
// is read after the idempotency lookup, by the first call only; before, the
// retry read it first and answered 400 "previous response not found" for an
// answer that was served and billed. A new request continuing a turn that
// is gone is still a 400, and its key then runs normally.
func TestResponsesReplayOutlivesPreviousTurn(t *testing.T) {
	clock := testclock.New(time.Now())
	g := newGateway(t, setup{now: clock.Now, extraYAML: "idempotency: {window: 1h}\n"})
	url := g.url + "/api/v1/responses"

	a := callPath(t, url, `{"model":"m","input":"Say hello"}`)
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(a.body), &r); a.status != 200 || err != nil {
		t.Fatalf("first turn: %d %s", a.status, a.body)
	}
	g.settle(t) // the turn is kept

	clock.Advance(30 * time.Minute)
	body := `{"model":"m","input":"And again","previous_response_id":"` + r.ID + `"}`
	first := callPath(t, url, body, "Idempotency-Key", key(t))
	if first.status != 200 {
		t.Fatalf("second turn: %d %s", first.status, first.body)
	}
	g.settle(t)
	if msgs := g.ups[0].Requests()[1].JSON["messages"].([]any); len(msgs) != 3 {
		t.Errorf("the second turn's upstream messages %v: want the first turn's two and this one", msgs)
	}

	// The first turn's window has ended; the keyed second turn's has not.
	clock.Advance(31 * time.Minute)
	again := callPath(t, url, body, "Idempotency-Key", key(t))
	if again.status != 200 || again.replayed != "true" || again.reqID != first.reqID || again.body != first.body {
		t.Errorf("a retry of an answered keyed request inside its window: %d replayed=%q %s\nwant the stored answer (200, Idempotency-Replayed: true, x-request-id %s)",
			again.status, again.replayed, again.body, first.reqID)
	}
	gone := callPath(t, url, body, "Idempotency-Key", key(t)+"-new")
	if gone.status != 400 || !strings.Contains(gone.body, "previous_response_id") {
		t.Errorf("a new request continuing a turn no longer kept: %d %s, want 400 on previous_response_id", gone.status, gone.body)
	}
	if calls := g.ups[0].Calls(); calls != 2 {
		t.Errorf("upstream calls %d, want 2", calls)
	}
	g.settle(t)
	// The refusal released the key: it runs another request (kept, its
	// record would answer 409).
	if ran := callPath(t, url, `{"model":"m","input":"Fresh"}`, "Idempotency-Key", key(t)+"-new"); ran.status != 200 || ran.replayed != "" {
		t.Errorf("the refused key, on another request: %d replayed=%q %s", ran.status, ran.replayed, ran.body)
	}
}

// loadFails is an idempotency store whose reads fail while fail is set.
type loadFails struct {
	idempotency.Store
	fail atomic.Bool
}

func (s *loadFails) Load(ctx context.Context, key string, now time.Time) (*idempotency.Record, error) {
	if s.fail.Load() {
		return nil, errors.New("store unreachable")
	}
	return s.Store.Load(ctx, key, now)
}

// TestResponsesPreviousTurnStoreDown: a previous_response_id whose kept turn
// cannot be read (the store failing) is 503 idempotency_store_unavailable
// with a Retry-After, as every other 503 of the store is; once the store is
// back, the same request continues the turn.
func TestResponsesPreviousTurnStoreDown(t *testing.T) {
	store := &loadFails{Store: memstore.New(1 << 20)}
	g := newGateway(t, setup{store: store})
	url := g.url + "/api/v1/responses"
	a := callPath(t, url, `{"model":"m","input":"Say hello"}`)
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(a.body), &r); a.status != 200 || err != nil {
		t.Fatalf("first turn: %d %s", a.status, a.body)
	}
	g.settle(t)
	body := `{"model":"m","input":"And again","previous_response_id":"` + r.ID + `"}`
	store.fail.Store(true)
	down := callPath(t, url, body)
	if down.status != 503 || down.code != "idempotency_store_unavailable" || down.header.Get("Retry-After") == "" {
		t.Errorf("the kept turn unreadable: %d %q Retry-After %q, want 503 idempotency_store_unavailable with a Retry-After", down.status, down.code, down.header.Get("Retry-After"))
	}
	store.fail.Store(false)
	if up := callPath(t, url, body); up.status != 200 {
		t.Errorf("the store back: %d %s", up.status, up.body)
	}
}

type storeKind struct {
	name string
	new  func(t testing.TB) idempotency.Store
}

// storeKinds are the idempotency stores the gateway's tests run on: the
// memory store, and DynamoDB (dynalite) under the integration build tag.
var storeKinds = []storeKind{
	{"memory", func(testing.TB) idempotency.Store { return memstore.New(1 << 30) }},
}

// TestIdempotencyRaceStores: 100 goroutines, one key, over one or two
// gateway instances on one store, each of storeKinds.
func TestIdempotencyRaceStores(t *testing.T) {
	for _, sk := range storeKinds {
		for _, stream := range []bool{false, true} {
			for _, instances := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/stream=%v/instances=%d", sk.name, stream, instances), func(t *testing.T) {
					raceOneKey(t, sk.new(t), instances, stream)
				})
			}
		}
	}
}

// silentOwner drops its heartbeats and its completion: an instance that
// froze or died in the middle of a request.
type silentOwner struct {
	idempotency.Store
	mu   sync.Mutex
	dead bool
}

func (s *silentOwner) kill() { s.mu.Lock(); s.dead = true; s.mu.Unlock() }

func (s *silentOwner) alive() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.dead }

func (s *silentOwner) Heartbeat(ctx context.Context, key, owner string, until time.Time) error {
	if !s.alive() {
		return fmt.Errorf("%w: instance is dead", idempotency.ErrUnavailable)
	}
	return s.Store.Heartbeat(ctx, key, owner, until)
}

func (s *silentOwner) Complete(ctx context.Context, key, owner string, a *idempotency.Answer) error {
	if !s.alive() {
		return fmt.Errorf("%w: instance is dead", idempotency.ErrUnavailable)
	}
	return s.Store.Complete(ctx, key, owner, a)
}

// TestIdempotencyOwnerDies: the instance running a keyed request dies
// (stops heartbeating and never completes); once its lease lapses, retries
// on the other instance answer 409 idempotency_replay_unavailable, and the
// upstream is never called again.
func TestIdempotencyOwnerDies(t *testing.T) {
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			store := sk.new(t)
			dying := &silentOwner{Store: store}
			g := newGateway(t, setup{store: dying, extraYAML: "idempotency: {lease: 300ms}\n"})
			survivor := g.instance(t, store)
			g.ups[0].SetDefault(providertest.Response{FirstChunkDelay: 1500 * time.Millisecond})
			firstc := make(chan answer, 1)
			go func() { firstc <- call(context.Background(), g.url, chatBody(""), "Idempotency-Key", key(t)) }()
			waitCalls(t, g.ups[0], 1)
			dying.kill()
			time.Sleep(700 * time.Millisecond) // the lease lapses
			for i := 0; i < 3; i++ {
				a := mustCall(t, survivor, chatBody(""), "Idempotency-Key", key(t))
				if a.status != 409 || a.code != "idempotency_replay_unavailable" {
					t.Errorf("retry %d after the owner died: %d %q", i, a.status, a.code)
				}
			}
			<-firstc
			if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
				t.Errorf("upstream calls (-want +got): the request ran again\n%s", diff)
			}
		})
	}
}
