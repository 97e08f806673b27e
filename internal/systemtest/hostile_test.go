package systemtest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// rawConn opens a TCP connection to the gateway at base (an http:// URL).
func rawConn(t *testing.T, base string) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func rawRequest(body string, contentLength int, header ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST /api/v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", testKey, contentLength)
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return b.String()
}

// TestBodyTimeout: a client that sends its headers and one byte of its body
// holds no admission slot while it trickles (max_in_flight is 1 and another
// request is served meanwhile), and gets 408 body_timeout in the error
// envelope once server.body_timeout has passed.
func TestBodyTimeout(t *testing.T) {
	g := newGateway(t, setup{extraYAML: "server: {max_in_flight: 1, body_timeout: 300ms}\n"})
	slow := rawConn(t, g.url)
	body := chatBody("")
	if _, err := io.WriteString(slow, rawRequest(body[:1], len(body))); err != nil {
		t.Fatal(err)
	}
	// The slot is free: a whole request is served while the slow one waits.
	resp := g.post(t, chatBody(""))
	if resp.StatusCode != 200 {
		t.Fatalf("a request beside the trickling one: status %d", resp.StatusCode)
	}
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	late, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatalf("the trickling request got no answer: %v", err)
	}
	defer late.Body.Close()
	expectError(t, late, http.StatusRequestTimeout, "body_timeout", "")
	if diff := cmp.Diff([]int{1, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

// TestStalledStreamClient: a client that stops reading a stream is dropped
// after server.write_timeout. Unkeyed, its admission slot comes back; keyed,
// the request finishes, stores its answer and is billed once while the
// client still sits there: a retry replays it.
func TestStalledStreamClient(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			ledger := memledger.New(memledger.Options{})
			g := newGateway(t, setup{
				accounts:  httpapi.Accounts{Ledger: ledger, Keys: ledger},
				extraYAML: "server: {max_in_flight: 1, write_timeout: 300ms}\nidempotency: {max_response_bytes: 67108864}\n",
			})
			// An answer far larger than the sockets' buffers: writing it
			// to a client that reads nothing blocks.
			big := make([]string, 160) // 10 MiB in 64 KiB chunks
			for i := range big {
				big[i] = strings.Repeat("x", 64<<10)
			}
			g.ups[0].Script(providertest.Response{Text: big})
			body := chatBody(`"stream":true`)
			var hdr []string
			if keyed {
				hdr = []string{"Idempotency-Key", key(t)}
			}
			stalled := rawConn(t, g.url)
			if tc, ok := stalled.(*net.TCPConn); ok {
				tc.SetReadBuffer(4096)
			}
			if _, err := io.WriteString(stalled, rawRequest(body, len(body), hdr...)); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); g.ups[0].Calls() == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond) // the stalled request owns its key
			}
			if keyed {
				// The retry gets the whole recorded answer while the first
				// client still reads nothing.
				var a answer
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					if a = mustCall(t, g.url, body, hdr...); a.status == 200 {
						break
					}
				}
				if a.status != 200 || a.header.Get("Idempotency-Replayed") != "true" || len(a.body) < 10<<20 {
					t.Fatalf("retry: status %d, replayed %q, %d bytes", a.status, a.header.Get("Idempotency-Replayed"), len(a.body))
				}
				g.apps[0].Finisher.Wait(context.Background()) // the stalled request still runs
				if tot := totals(t, httpapi.Accounts{Ledger: ledger}); tot.Total.Requests != 1 {
					t.Errorf("ledger %+v, want the answer billed once", tot.Total)
				}
			}
			// The slot comes back once the stalled client is dropped.
			var status int
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				resp := g.post(t, chatBody(""))
				io.Copy(io.Discard, resp.Body)
				if status = resp.StatusCode; status == 200 {
					break
				}
			}
			if status != 200 {
				t.Fatalf("after the stalled client: status %d, want the slot back", status)
			}
			if got := g.ups[0].Calls(); got != 2 {
				t.Errorf("upstream calls %d, want 2 (the stalled request once, the later one once)", got)
			}
		})
	}
}

// TestMultiLineEventsLiveAndReplay: an upstream event whose data spans
// several data: lines reaches a live client as the same whole event a
// replay sends (the one SSE writer splits line breaks).
func TestMultiLineEventsLiveAndReplay(t *testing.T) {
	g := newGateway(t, setup{})
	chunk := func(content, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		// Pretty-printed over two lines, as the SSE format allows.
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-0",` + "\n" +
			`data: "choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":` + f + `}]}` + "\n\n"
	}
	sseBody := chunk("Hel", "") + chunk("lo", "stop") +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-0","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}` + "\n\n" +
		"data: [DONE]\n\n"
	g.ups[0].SetDefault(providertest.Response{Body: sseBody, Header: map[string]string{"Content-Type": "text/event-stream"}})
	body := chatBody(`"stream":true`)
	k := key(t)
	live := g.post(t, body, "Idempotency-Key", k)
	if live.StatusCode != 200 {
		t.Fatalf("status %d", live.StatusCode)
	}
	liveEvents := events(t, live)
	replay := g.post(t, body, "Idempotency-Key", k)
	if replay.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatal("the second call was not a replay")
	}
	if diff := cmp.Diff(events(t, replay), liveEvents); diff != "" {
		t.Errorf("live and replayed events differ (-replay +live):\n%s", diff)
	}
	if len(liveEvents) < 3 || !strings.Contains(liveEvents[0], `"choices"`) || !strings.Contains(liveEvents[0], "Hel") {
		t.Errorf("live events %q: want the whole two-line event first", liveEvents)
	}
}

// TestRevokedConfigKey: a key written in the config file and revoked with
// the admin tool (the key store) stays revoked.
func TestRevokedConfigKey(t *testing.T) {
	pepper := []byte("pepper")
	ledger := memledger.New(memledger.Options{Pepper: pepper})
	g := newGateway(t, setup{accounts: httpapi.Accounts{Ledger: ledger, Keys: ledger, Pepper: pepper}})
	if resp := g.post(t, chatBody("")); resp.StatusCode != 200 {
		t.Fatalf("before the revocation: %d", resp.StatusCode)
	}
	ctx := context.Background()
	id := billing.ConfigKeyID(pepper, testKey)
	if err := ledger.ImportKey(ctx, "proj", billing.HashKey(pepper, testKey), id); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	expectError(t, g.post(t, chatBody("")), 401, "invalid_api_key", "")
	// Another config key of the project still works.
	if resp := g.post(t, chatBody(""), "Authorization", "Bearer "+otherKey); resp.StatusCode != 200 {
		t.Errorf("the other key: %d", resp.StatusCode)
	}
}

// flakyLedger is a ledger whose store can be cut: every call fails with
// billing.ErrUnavailable while down.
type flakyLedger struct {
	billing.Ledger
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flakyLedger) fail() error {
	f.calls.Add(1)
	if f.down.Load() {
		return fmt.Errorf("%w: cut by the test", billing.ErrUnavailable)
	}
	return nil
}

func (f *flakyLedger) Hold(ctx context.Context, h billing.Hold) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Ledger.Hold(ctx, h)
}

func (f *flakyLedger) Price(ctx context.Context, e billing.Entry) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Ledger.Price(ctx, e)
}

func (f *flakyLedger) Bill(ctx context.Context, e billing.Entry) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Ledger.Bill(ctx, e)
}

func (f *flakyLedger) Unhold(ctx context.Context, project, requestID string) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Ledger.Unhold(ctx, project, requestID)
}

func (f *flakyLedger) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	if err := f.fail(); err != nil {
		return billing.Account{}, err
	}
	return f.Ledger.Account(ctx, project, keyID)
}

// TestHoldBeforeProvider: a request whose hold cannot be written is refused
// with 503 billing_unavailable before any provider call; a keyed one leaves
// its key free, so that the retry runs once the store is back.
func TestHoldBeforeProvider(t *testing.T) {
	base := memledger.New(memledger.Options{})
	flaky := &flakyLedger{Ledger: base}
	g := newGateway(t, setup{accounts: httpapi.Accounts{Ledger: flaky, Keys: base}})
	// The account read works; the hold does not.
	g.ups[0].SetHandler(func(int, providertest.Request) providertest.Response { return providertest.Response{} })
	k := key(t)
	flaky.down.Store(true)
	for _, hdr := range [][]string{nil, {"Idempotency-Key", k}} {
		a := mustCall(t, g.url, chatBody(""), hdr...)
		if a.status != 503 || a.code != "billing_unavailable" {
			t.Errorf("with the ledger down (%v): %d %q", hdr, a.status, a.code)
		}
	}
	if diff := cmp.Diff([]int{0, 0}, g.calls()); diff != "" {
		t.Errorf("upstream calls while the ledger is down (-want +got):\n%s", diff)
	}
	flaky.down.Store(false)
	if a := mustCall(t, g.url, chatBody(""), "Idempotency-Key", k); a.status != 200 || a.header.Get("Idempotency-Replayed") != "" {
		t.Errorf("the keyed retry after the outage: %d, replayed %q; want it to run", a.status, a.header.Get("Idempotency-Replayed"))
	}
	g.settle(t)
	if tot := totals(t, httpapi.Accounts{Ledger: base}); tot.Total.Requests != 1 || tot.Total.CostNanos != 14000 {
		t.Errorf("ledger %+v, want the one answer", tot.Total)
	}
}

// TestNoBillLostInOutage: the account store goes away once the providers
// are called (after every hold) and comes back later: every answer the
// clients received is billed once, streaming and not, keyed and not, and
// GET /api/v1/usage shows the same sum.
func TestNoBillLostInOutage(t *testing.T) {
	base := memledger.New(memledger.Options{})
	flaky := &flakyLedger{Ledger: base}
	g := newGateway(t, setup{accounts: httpapi.Accounts{Ledger: flaky, Keys: base}})
	g.ups[0].SetHandler(func(call int, _ providertest.Request) providertest.Response {
		flaky.down.Store(true) // the store is gone from the first provider call on
		return providertest.Response{Text: strings.Split(strings.Repeat("w ", call%5+1), " ")}
	})
	bodies := []string{chatBody(""), chatBody(`"stream":true,"stream_options":{"include_usage":true}`)}
	var sum float64
	var answers []answer
	for i := range 8 {
		var hdr []string
		if i%2 == 1 {
			hdr = []string{"Idempotency-Key", fmt.Sprintf("%s-%d", key(t), i)}
		}
		a := mustCall(t, g.url, bodies[i%2], hdr...)
		if a.status != 200 {
			t.Fatalf("request %d: %d %q", i, a.status, a.code)
		}
		sum += costOf(t, a)
		answers = append(answers, a)
		flaky.down.Store(false) // the next hold lands
	}
	flaky.down.Store(true)
	time.Sleep(300 * time.Millisecond) // the finisher retries into the outage
	flaky.down.Store(false)
	g.settle(t) // the finisher lands its retries within its backoff
	ctx := context.Background()
	tot := totals(t, httpapi.Accounts{Ledger: base})
	if tot.Total.Requests != int64(len(answers)) || tot.Total.CostNanos != billing.USDToNanos(sum) {
		t.Errorf("ledger %+v; the clients received %d answers costing %v USD", tot.Total, len(answers), sum)
	}
	acct, err := base.Account(ctx, "proj", billing.ConfigKeyID(nil, testKey))
	if err != nil {
		t.Fatal(err)
	}
	if acct.SpentNanos != billing.USDToNanos(sum) {
		t.Errorf("project spend %d nano-USD, want %d", acct.SpentNanos, billing.USDToNanos(sum))
	}
	status, usage := getUsage(t, g.url, "", testKey)
	if status != 200 || usage["total"].(map[string]any)["cost"].(float64) != billing.NanosToUSD(billing.USDToNanos(sum)) {
		t.Errorf("GET /api/v1/usage: %d %v, want cost %v", status, usage["total"], sum)
	}
	var rec billing.Reconciler = base
	rep, err := rec.Reconcile(ctx, time.Now().Add(24*time.Hour), false)
	if err != nil || len(rep.Settled)+len(rep.WrittenOff) != 0 {
		t.Errorf("reconcile after the finisher: %+v %v, want nothing pending", rep, err)
	}
}

// Every write gets its own deadline, an error's too: a request that fails
// later than server.write_timeout after it began still answers its error,
// keyed (whose writer was asked, at the start, whether writes are bounded)
// or not.
func TestLateErrorReachesClient(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		g := newGateway(t, setup{providers: 1, extraYAML: "server:\n  write_timeout: 300ms\n"})
		g.ups[0].SetHandler(func(int, providertest.Request) providertest.Response {
			return providertest.Response{Status: 500, HeaderDelay: 700 * time.Millisecond}
		})
		var header []string
		if keyed {
			header = []string{"Idempotency-Key", "late-error"}
		}
		resp := g.post(t, chatBody(""), header...)
		expectError(t, resp, http.StatusBadGateway, "all_providers_failed", "")
	}
}

// A keyed stream's client that reads slower than the provider writes is
// dropped once the pump holds its cap, and sees its answer break off (a
// chunked body without its last chunk), never a stream that ends as if it
// were whole; a retry with its key gets the whole recorded answer, and the
// provider was called once.
func TestSlowKeyedReaderSeesItsStreamBreak(t *testing.T) {
	g := newGateway(t, setup{providers: 1, extraYAML: "idempotency: {max_response_bytes: 67108864}\n"})
	// About 25 MB: more than the pump's cap (8 MiB) and the sockets'
	// buffers together (the gateway's send buffer is at most 4 MiB here,
	// and the client's receive buffer grows only as the client reads).
	text := make([]string, 500)
	for i := range text {
		text[i] = strings.Repeat("y", 50<<10)
	}
	g.ups[0].SetDefault(providertest.Response{Text: text})
	body, k := chatBody(`"stream":true`), key(t)
	resp := g.post(t, body, "Idempotency-Key", k)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got bytes.Buffer
	buf := make([]byte, 32<<10)
	n, rerr := resp.Body.Read(buf)
	got.Write(buf[:n])
	// The first client reads no further until the answer is recorded
	// whole: a retry with its key gets it (joining or replaying it).
	var a answer
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if a = mustCall(t, g.url, body, "Idempotency-Key", k); a.status == http.StatusOK {
			break
		}
	}
	if a.status != http.StatusOK || !strings.Contains(a.body, "data: [DONE]") || len(a.body) < 25_000_000 {
		t.Fatalf("retry: status %d, %d bytes", a.status, len(a.body))
	}
	for rerr == nil {
		n, rerr = resp.Body.Read(buf)
		got.Write(buf[:n])
	}
	if !errors.Is(rerr, io.ErrUnexpectedEOF) || bytes.Contains(got.Bytes(), []byte("data: [DONE]")) {
		t.Fatalf("the first client read %d bytes, ending with %v; want its stream cut off (io.ErrUnexpectedEOF) before its end", got.Len(), rerr)
	}
	if calls := g.ups[0].Calls(); calls != 1 {
		t.Errorf("%d provider calls, want 1", calls)
	}
}
