package systemtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// steadyReader reads at a steady pace: at most 32 KiB a read and a 5 ms
// pause after each (about 6 MB/s), so it never stops reading for anywhere
// near the gateway's write_timeout (1.5 s here).
type steadyReader struct{ r io.Reader }

func (s steadyReader) Read(p []byte) (int, error) {
	if len(p) > 32<<10 {
		p = p[:32<<10]
	}
	n, err := s.r.Read(p)
	time.Sleep(5 * time.Millisecond)
	return n, err
}

// docs/api.md#slow-and-hostile-clients: "A write to the client that makes no progress for
// server.write_timeout drops the client." A client that reads a large JSON
// answer steadily (progress every few milliseconds) must get all of it, keyed
// or not, however long the whole body takes.
func TestSteadyReaderGetsWholeJSONAnswer(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			// 12 MiB at about 6 MB/s: about 2 s in all, and never close to
			// 1.5 s without progress (the kernel wakes a blocked write once a
			// third of the socket's send buffer, a few MB on loopback, has
			// drained: a fifth of a second at that rate).
			g := newGateway(t, setup{providers: 1, extraYAML: "server: {write_timeout: 1500ms}\nidempotency: {max_response_bytes: 67108864}\n"})
			g.ups[0].SetDefault(providertest.Response{PadBytes: 12 << 20})
			var hdr []string
			if keyed {
				hdr = []string{"Idempotency-Key", key(t)}
			}
			c := rawConn(t, g.url)
			body := chatBody("")
			if _, err := io.WriteString(c, rawRequest(body, len(body), hdr...)); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			start := time.Now()
			resp, err := http.ReadResponse(bufio.NewReaderSize(steadyReader{c}, 32<<10), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || err != nil || int64(len(b)) != resp.ContentLength {
				t.Fatalf("a client reading steadily got status %d and %d of %d bytes in %s, ending with %v; want the whole answer",
					resp.StatusCode, len(b), resp.ContentLength, time.Since(start).Round(time.Millisecond), err)
			}
		})
	}
}

// An unkeyed stream whose client stops reading is dropped after
// write_timeout: the provider did nothing wrong, so the request's log line
// must not say it ended by a provider error.
func TestDroppedStreamClientIsNotAProviderError(t *testing.T) {
	g := newGateway(t, setup{providers: 1, extraYAML: "server: {write_timeout: 300ms}\n"})
	big := make([]string, 160) // 10 MiB in 64 KiB chunks
	for i := range big {
		big[i] = strings.Repeat("x", 64<<10)
	}
	g.ups[0].Script(providertest.Response{Text: big})
	stalled := rawConn(t, g.url)
	if tc, ok := stalled.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	body := chatBody(`"stream":true`)
	if _, err := io.WriteString(stalled, rawRequest(body, len(body))); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for deadline := time.Now().Add(30 * time.Second); line == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line for the stalled request; logs: %s", g.logs.String())
		}
		for _, l := range strings.Split(g.logs.String(), "\n") {
			if strings.Contains(l, `"msg":"request"`) {
				json.Unmarshal([]byte(l), &line)
			}
		}
	}
	if line["end"] == "provider_error" || line["status"] != 499.0 {
		t.Errorf("log line of a request whose client stopped reading: status %v, end %v; want 499 and an end that is not provider_error\n%s",
			line["status"], line["end"], g.logs.String())
	}
}

// stuckLedger is an account store that does not answer one call (Account
// or Hold) until its caller's context ends, as a remote store would.
type stuckLedger struct {
	billing.Ledger
	stuck   string // "account" or "hold"
	entered chan struct{}
}

func (l *stuckLedger) wait(ctx context.Context) error {
	select {
	case l.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return fmt.Errorf("%w: %v", billing.ErrUnavailable, ctx.Err())
}

func (l *stuckLedger) Account(ctx context.Context, project, keyID string) (billing.Account, error) {
	if l.stuck == "account" {
		return billing.Account{}, l.wait(ctx)
	}
	return l.Ledger.Account(ctx, project, keyID)
}

func (l *stuckLedger) Hold(ctx context.Context, h billing.Hold) error {
	if l.stuck == "hold" {
		return l.wait(ctx)
	}
	return l.Ledger.Hold(ctx, h)
}

// A client that goes away while its unkeyed request waits on the account
// store is a client gone (status 499 in the log line, as when it leaves
// during the idempotency lookup or the provider call), not a 503
// billing_unavailable answer counted in the Errors5xx metric.
func TestClientGoneDuringBillingIsNot503(t *testing.T) {
	for _, stuck := range []string{"account", "hold"} {
		t.Run(stuck, func(t *testing.T) {
			base := memledger.New(memledger.Options{})
			l := &stuckLedger{Ledger: base, stuck: stuck, entered: make(chan struct{}, 1)}
			metricsBuf := &syncBuffer{}
			g := newGateway(t, setup{accounts: httpapi.Accounts{Ledger: l, Keys: base}, metrics: metricsBuf})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				call(ctx, g.url, chatBody(""))
			}()
			select {
			case <-l.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the request never reached the account store")
			}
			cancel()
			<-done
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(metricsBuf.String(), `"Requests"`); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no metrics line")
				}
			}
			g.settle(t)
			var m map[string]any
			json.Unmarshal([]byte(strings.SplitN(metricsBuf.String(), "\n", 2)[0]), &m)
			if !strings.Contains(g.logs.String(), `"status":499`) || m["Errors5xx"] != 0.0 {
				t.Errorf("client gone while the %s call waited: Errors5xx %v; logs:\n%s", stuck, m["Errors5xx"], g.logs.String())
			}
		})
	}
}
