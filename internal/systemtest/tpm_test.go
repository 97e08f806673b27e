package systemtest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/testclock"
	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

// tpmGateways starts n gateway instances of cfg on one backend (its
// idempotency store, ledger and rate limiter: one dynalite table for
// DynamoDB, as n Lambda environments share it), each behind its own
// loopback server, on the clock now. cfg's "%s" verbs take testKey.
func tpmGateways(t *testing.T, b backend, n int, now func() time.Time, cfg string) []string {
	t.Helper()
	c, err := catalog.Parse([]byte(strings.ReplaceAll(cfg, "%s", testKey)))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, cfg)
	}
	store, acc := b.new(t)
	var urls []string
	for range n {
		a, err := app.FromConfig(c, app.Options{Getenv: func(string) string { return "upstream-secret" },
			Logger: slog.New(slog.DiscardHandler), Now: now, Store: store, Accounts: acc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			a.Finisher.Drain(ctx)
		})
		srv := httptest.NewServer(a.Handler)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return urls
}

// holdFirst makes up's first call wait, once it has arrived (arrived is
// closed), until release is called (at the latest when the test ends);
// every call answers resp.
func holdFirst(t *testing.T, up *providertest.Server, resp providertest.Response) (arrived <-chan struct{}, release func()) {
	t.Helper()
	in, gate := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	up.SetHandler(func(call int, _ providertest.Request) providertest.Response {
		if call == 1 {
			close(in)
			<-gate
		}
		return resp
	})
	return in, release
}

// startedAt is the test clock's start: ten seconds before a minute ends.
var startedAt = time.Date(2026, 12, 7, 10, 0, 50, 0, time.UTC)

// TestTPMFollowsAStreamIntoTheNextMinute: a stream that started in one
// minute and goes on sending in the next counts its output there. Two
// instances share the limiter (one DynamoDB table, or one process's
// memory). A stream with max_tokens 200 starts at 10:00:50 under a key
// tpm of 400; at 10:01:10, once it has sent output in that minute, a
// request on the other instance that reserves about 270 does not fit
// beside the stream's 200; once the stream ends having produced 100, the
// minute is corrected to them: a reserve of about 270 fits, and after
// it (110 used) one of about 200 does not.
func TestTPMFollowsAStreamIntoTheNextMinute(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			clock := testclock.New(startedAt)
			up := providertest.New(t)
			gates := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
			var once [2]sync.Once
			open := func(i int) { once[i].Do(func() { close(gates[i]) }) }
			t.Cleanup(func() { open(0); open(1) })
			// Every answer uses 10 + 100 tokens. The first call's content
			// chunk i (0, 1) waits, once sent, for gate i; then its last
			// chunk and usage go.
			up.SetHandler(func(call int, _ providertest.Request) providertest.Response {
				r := providertest.Response{Text: []string{"a", "b", "c"}, Usage: &providertest.Usage{PromptTokens: 10, CompletionTokens: 100}}
				if call == 1 {
					r.Sent = func(i int) {
						if i < 2 {
							<-gates[i]
						}
					}
				}
				return r
			})
			urls := tpmGateways(t, b, 2, clock.Now, fmt.Sprintf(`providers:
  - {name: p0, api: openai, base_url: %q, api_key_env: K}
models:
  - id: m
    routes:
      - {provider: p0, model: up-0, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %%s, tpm: 400}]
`, up.URL()))

			resp := postTo(t, urls[0], chatBody(`"stream":true,"max_tokens":200`))
			if resp.StatusCode != 200 {
				body, _ := io.ReadAll(resp.Body)
				t.Fatalf("the stream: %d %s", resp.StatusCode, body)
			}
			stream := sse.NewReader(resp.Body, 1<<20)
			untilContent := func(text string) {
				t.Helper()
				for {
					ev, err := stream.Next()
					if err != nil {
						t.Fatalf("reading the stream for %q: %v", text, err)
					}
					if strings.Contains(string(ev.Data), `"content":"`+text+`"`) {
						return
					}
				}
			}
			untilContent("a")
			clock.Advance(20 * time.Second) // 10:01:10
			open(0)
			untilContent("b")

			if a := mustCall(t, urls[1], chatBody(`"max_tokens":250`)); a.status != 429 || a.code != "rate_limited" || !strings.Contains(a.body, "tokens per minute") {
				t.Errorf("a reserve of about 270 beside the stream's 200 in its second minute: %d %q %s; want 429 rate_limited", a.status, a.code, a.body)
			}
			open(1)
			if rest, err := io.ReadAll(resp.Body); err != nil || !strings.Contains(string(rest), "[DONE]") {
				t.Fatalf("the stream's end: %v %s", err, rest)
			}
			if a := mustCall(t, urls[1], chatBody(`"max_tokens":250`)); a.status != 200 {
				t.Errorf("a reserve of about 270 beside the stream's 100 once it ended: %d %s; want 200", a.status, a.body)
			}
			// The minute holds the stream's 100 and that request's 110.
			if a := mustCall(t, urls[0], chatBody(`"max_tokens":180`)); a.status != 429 || a.code != "rate_limited" {
				t.Errorf("a reserve of about 200 beside 210 counted: %d %s; want 429", a.status, a.body)
			}
		})
	}
}

// TestTPMReservesWhatTheUpstreamAllows: a request that sets no output
// limit reserves what its route's upstream lets it produce, and a request
// of n choices n times its output. One request is held upstream on one
// instance while the next goes to the other (both on one limiter).
func TestTPMReservesWhatTheUpstreamAllows(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Run("anthropic's default", func(t *testing.T) {
				// The Anthropic adapter sends max_tokens 4096 on a request
				// that sets none: under a tpm of 5000 the first such
				// request fits and the second does not, however little the
				// first will use.
				claude := providertest.NewAnthropic(t)
				arrived, release := holdFirst(t, claude, providertest.Response{})
				urls := tpmGateways(t, b, 2, testclock.New(startedAt).Now, fmt.Sprintf(`providers:
  - {name: claude, api: anthropic, base_url: %q, api_key_env: K}
models:
  - id: m
    routes:
      - {provider: claude, model: claude-x, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %%s, tpm: 5000}]
`, claude.URL()))
				first := goCall(urls[0], chatBody(""))
				awaitArrival(t, arrived, first)
				if a := mustCall(t, urls[1], chatBody("")); a.status != 429 || a.code != "rate_limited" || !strings.Contains(a.body, "reserves 4") {
					t.Errorf("a second request without max_tokens beside one that may use 4096: %d %q %s; want 429", a.status, a.code, a.body)
				}
				release()
				if a := <-first; a.err != nil || a.status != 200 {
					t.Fatalf("the first: %v %d %s", a.err, a.status, a.body)
				}
				if got := claude.Requests()[0].JSON["max_tokens"]; got != 4096.0 {
					t.Errorf("the upstream got max_tokens %v; the reserve assumed 4096", got)
				}
			})
			t.Run("n choices", func(t *testing.T) {
				up := providertest.New(t)
				arrived, release := holdFirst(t, up, providertest.Response{})
				urls := tpmGateways(t, b, 2, testclock.New(startedAt).Now, fmt.Sprintf(`providers:
  - {name: p0, api: openai, base_url: %q, api_key_env: K}
models:
  - id: m
    routes:
      - {provider: p0, model: up-0, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %%s, tpm: 400}]
`, up.URL()))
				// Three choices of up to 100 tokens each: 300 and the prompt.
				first := goCall(urls[0], chatBody(`"max_tokens":100,"n":3`))
				awaitArrival(t, arrived, first)
				if a := mustCall(t, urls[1], chatBody(`"max_tokens":100`)); a.status != 429 || a.code != "rate_limited" {
					t.Errorf("a reserve of about 120 beside one of 3 x 100 and a prompt: %d %q %s; want 429", a.status, a.code, a.body)
				}
				release()
				if a := <-first; a.err != nil || a.status != 200 {
					t.Fatalf("the first: %v %d %s", a.err, a.status, a.body)
				}
			})
			t.Run("a route's max_output_tokens", func(t *testing.T) {
				// The route's model produces at most 300 for a request that
				// sets no limit.
				up := providertest.New(t)
				arrived, release := holdFirst(t, up, providertest.Response{})
				urls := tpmGateways(t, b, 2, testclock.New(startedAt).Now, fmt.Sprintf(`providers:
  - {name: p0, api: openai, base_url: %q, api_key_env: K}
models:
  - id: m
    routes:
      - {provider: p0, model: up-0, input_price: 1, output_price: 2, max_output_tokens: 300}
projects:
  - id: proj
    keys: [{key: %%s, tpm: 400}]
`, up.URL()))
				first := goCall(urls[0], chatBody(""))
				awaitArrival(t, arrived, first)
				if a := mustCall(t, urls[1], chatBody(`"max_tokens":100`)); a.status != 429 || a.code != "rate_limited" {
					t.Errorf("a reserve of about 120 beside one of 300 and a prompt: %d %q %s; want 429", a.status, a.code, a.body)
				}
				release()
				if a := <-first; a.err != nil || a.status != 200 {
					t.Fatalf("the first: %v %d %s", a.err, a.status, a.body)
				}
			})
			t.Run("no known maximum", func(t *testing.T) {
				// Neither the adapter nor the route says what the model
				// produces at most: a request that sets no limit may use
				// the whole minute, and reserves the whole tpm.
				up := providertest.New(t)
				arrived, release := holdFirst(t, up, providertest.Response{})
				urls := tpmGateways(t, b, 2, testclock.New(startedAt).Now, fmt.Sprintf(`providers:
  - {name: p0, api: openai, base_url: %q, api_key_env: K}
models:
  - id: m
    routes:
      - {provider: p0, model: up-0, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %%s, tpm: 400}]
`, up.URL()))
				first := goCall(urls[0], chatBody(""))
				awaitArrival(t, arrived, first)
				if a := mustCall(t, urls[1], chatBody(`"max_tokens":5`)); a.status != 429 || a.code != "rate_limited" {
					t.Errorf("a reserve of about 25 beside a request that may use the whole minute: %d %q %s; want 429", a.status, a.code, a.body)
				}
				release()
				if a := <-first; a.err != nil || a.status != 200 {
					t.Fatalf("the first: %v %d %s", a.err, a.status, a.body)
				}
			})
		})
	}
}

// awaitArrival waits until a held request has arrived upstream, or fails
// the test with its answer when it ended first.
func awaitArrival(t *testing.T, arrived <-chan struct{}, held <-chan answer) {
	t.Helper()
	select {
	case <-arrived:
	case a := <-held:
		t.Fatalf("the request to hold ended before it reached the upstream: %v %d %s", a.err, a.status, a.body)
	}
}

// goCall sends one chat completion on a goroutine of its own.
func goCall(url, body string) <-chan answer {
	c := make(chan answer, 1)
	go func() { c <- call(context.Background(), url, body) }()
	return c
}

// TestDuplicateMembersRefused: a body with a member name twice in one
// object, at any depth, is refused with 400 invalid_request on every
// client API (count_tokens too), keyed or not, before any provider call:
// the gateway and the provider could read different copies (reserve
// max_tokens 1 against the tpm while the provider reads 900). Each goes
// to one of two instances on one limiter.
func TestDuplicateMembersRefused(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			claude, up := providertest.NewAnthropic(t), providertest.New(t)
			urls := tpmGateways(t, b, 2, testclock.New(startedAt).Now, fmt.Sprintf(`providers:
  - {name: claude, api: anthropic, base_url: %q, api_key_env: K}
  - {name: p0, api: openai, base_url: %q, api_key_env: K}
models:
  - id: m
    routes:
      - {provider: claude, model: claude-x, input_price: 1, output_price: 2}
  - id: o
    routes:
      - {provider: p0, model: up-0, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %%s, tpm: 1000}]
`, claude.URL(), up.URL()))
			const msgs = `"messages":[{"role":"user","content":"hi"}]`
			cases := []struct{ name, path, body string }{
				{"chat max_tokens", "/api/v1/chat/completions", `{"model":"o","max_tokens":1,` + msgs + `,"max_tokens":900}`},
				{"chat escaped", "/api/v1/chat/completions", `{"model":"o","max_tokens":1,` + msgs + `,"max_tok\u0065ns":900}`},
				{"chat in a message", "/api/v1/chat/completions", `{"model":"o","messages":[{"role":"user","content":"hi","content":"ho"}]}`},
				{"chat to anthropic", "/api/v1/chat/completions", `{"model":"m","max_completion_tokens":1,"max_completion_tokens":900,` + msgs + `}`},
				{"chat deep", "/api/v1/chat/completions", `{"model":"o",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","type":"number"}}}}}]}`},
				{"messages max_tokens", "/api/v1/messages", `{"model":"m","max_tokens":1,"max_tokens":900,` + msgs + `}`},
				{"messages in a block", "/api/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}`},
				{"messages translated", "/api/v1/messages", `{"model":"o","max_tokens":1,"max_tokens":900,` + msgs + `}`},
				{"responses max_output_tokens", "/api/v1/responses", `{"model":"o","max_output_tokens":16,"max_output_tokens":900,"input":"hi"}`},
				{"responses in an item", "/api/v1/responses", `{"model":"o","max_output_tokens":16,"input":[{"role":"user","content":"hi","role":"user"}]}`},
				{"count_tokens", "/api/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi","content":"ho"}]}`},
			}
			for i, c := range cases {
				for _, keyed := range []bool{false, true} {
					header := []string{"Anthropic-Version", "2023-06-01", "Content-Type", "application/json"}
					if keyed {
						header = append(header, "Idempotency-Key", fmt.Sprintf("dup-%s-%d", b.name, i))
					}
					a := callPath(t, urls[i%2]+c.path, c.body, header...)
					if a.status != 400 || a.code != "invalid_request" || !strings.Contains(a.body, "twice") {
						t.Errorf("%s (keyed %v): %d %q %s; want 400 invalid_request naming the member given twice", c.name, keyed, a.status, a.code, a.body)
					}
				}
			}
			if n, m, c := up.Calls(), claude.Calls(), len(claude.CountTokensRequests()); n+m+c != 0 {
				t.Errorf("the providers were called: %d chat, %d messages, %d count_tokens; want none", n, m, c)
			}
		})
	}
}
