//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/faultproxy"
	"github.com/buzzgate/buzzgate/internal/rie"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/sse"
)

// faultRig is the gateway binary (as many processes as a test starts) on
// DynamoDB (dynalite) behind a fault proxy, in front of one fake upstream.
type faultRig struct {
	t      *testing.T
	proxy  *faultproxy.Proxy
	up     *providertest.Server
	table  string
	ledger *dynamoledger.Store // straight to dynalite, past the proxy
	config string
}

const faultKey = "sk-fault-test-key"

func newFaultRig(t *testing.T) *faultRig {
	t.Helper()
	// A dynalite of its own: these tests cut and reset its connections,
	// and nothing else should depend on how it takes that.
	srv, err := dynalite.Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() {
			t.Logf("dynalite's output:\n%s", srv.Output())
		}
	})
	endpoint := srv.Endpoint
	client := dynalite.Client(t, endpoint)
	table := dynalite.Table(t, client, "fault")
	proxy, err := faultproxy.New(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetGentleUpstream(true) // fault the link, not dynalite
	t.Cleanup(func() { proxy.Close() })
	up := providertest.New(t)
	cfg := fmt.Sprintf(`providers:
  - {name: up, api: openai, base_url: %q}
models:
  - id: m
    routes:
      - {provider: up, model: up-m, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %s}]
idempotency: {lease: 1s}
`, up.URL(), faultKey)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &faultRig{t: t, proxy: proxy, up: up, table: table, config: path,
		ledger: dynamoledger.New(client, table, dynamoledger.Options{})}
}

// start starts a gateway on the rig's store (through the fault proxy).
func (r *faultRig) start() *gatewayProc {
	r.t.Helper()
	return startGateway(r.t, "BUZZGATE_CONFIG="+r.config,
		"BUZZGATE_STORE=dynamodb", "BUZZGATE_TABLE="+r.table, "AWS_ENDPOINT_URL_DYNAMODB="+r.proxy.URL(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x")
}

// result is one answer as its client received it.
type result struct {
	status   int
	replayed bool
	cost     float64
	body     string
}

func (p *gatewayProc) call(t *testing.T, body, idemKey string) result {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.base+"/api/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+faultKey)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	r := result{status: resp.StatusCode, replayed: resp.Header.Get("Idempotency-Replayed") == "true", body: string(raw)}
	if r.status != 200 {
		return r
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(strings.NewReader(r.body), 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			var ch struct {
				Usage *struct{ Cost float64 } `json:"usage"`
			}
			if json.Unmarshal(ev.Data, &ch) == nil && ch.Usage != nil {
				r.cost = ch.Usage.Cost
			}
		}
		return r
	}
	var c struct {
		Usage struct{ Cost float64 } `json:"usage"`
	}
	json.Unmarshal(raw, &c)
	r.cost = c.Usage.Cost
	return r
}

const (
	plainBody  = `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`
	streamBody = `{"model":"m","messages":[{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true}}`
)

// checkBilledOnce checks that spend = ledger = the answers the clients
// received, each once. With wait, the gateway's own retries are given time
// to land first (the store is back; its finisher bills within its backoff).
// Then one reconcile runs as of a day later (every hold is past its
// deadline), and the sums must hold still.
func (r *faultRig) checkBilledOnce(answers []result, wait bool) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	var want int64
	for _, a := range answers {
		want += billing.USDToNanos(a.cost)
	}
	sums := func() (entries, cost, spent int64) {
		tot, err := r.ledger.Totals(ctx, "proj", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		acct, err := r.ledger.Account(ctx, "proj", "")
		if err != nil {
			t.Fatal(err)
		}
		return tot.Total.Requests, tot.Total.CostNanos, acct.SpentNanos
	}
	for deadline := time.Now().Add(30 * time.Second); wait && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n, c, sp := sums(); n == int64(len(answers)) && c == want && sp == want {
			break
		}
	}
	rep, err := r.ledger.Reconcile(ctx, time.Now().Add(24*time.Hour), true)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if wait && len(rep.Settled)+len(rep.WrittenOff) > 0 {
		t.Errorf("the reconcile found %d to settle and %d to write off; the gateway should have billed them", len(rep.Settled), len(rep.WrittenOff))
	}
	if n, c, sp := sums(); n != int64(len(answers)) || c != want || sp != want {
		t.Errorf("ledger %d entries, %d nano-USD; spend %d; the clients received %d answers costing %d", n, c, sp, len(answers), want)
	}
}

// TestKilledRightAfterTheAnswer: SIGKILL of the gateway right after each
// answer reached its client, with a slow store (so that its bill is still
// being written): after one reconcile, every answer is billed exactly once.
func TestKilledRightAfterTheAnswer(t *testing.T) {
	r := newFaultRig(t)
	r.proxy.SetLatency(30*time.Millisecond, 30*time.Millisecond)
	var answers []result
	for i, body := range []string{plainBody, streamBody, plainBody, streamBody} {
		g := r.start()
		key := ""
		if i%2 == 1 {
			key = fmt.Sprintf("kill-%d", i)
		}
		a := g.call(t, body, key)
		g.Stop(0) // SIGKILL at once: its bill and its record may be half written
		if a.status != 200 || a.cost <= 0 {
			t.Fatalf("request %d: %d %s", i, a.status, a.body)
		}
		answers = append(answers, a)
	}
	r.proxy.SetLatency(0, 0)
	r.checkBilledOnce(answers, false)
	if got := r.up.Calls(); got != len(answers) {
		t.Errorf("upstream calls %d, want %d", got, len(answers))
	}
}

// TestStoreCutMidAnswer: the store is cut while answers are being produced
// (after their holds) and comes back seconds later. The answers reach their
// clients; once the store is back the gateway completes the keyed record
// (a retry replays it) and bills every answer once.
func TestStoreCutMidAnswer(t *testing.T) {
	r := newFaultRig(t)
	r.up.SetDefault(providertest.Response{Text: []string{"a", "b", "c", "d", "e"}, ChunkDelay: 100 * time.Millisecond})
	g := r.start()
	var (
		mu      sync.Mutex
		answers []result
		wg      sync.WaitGroup
	)
	for i, body := range []string{plainBody, streamBody, streamBody} {
		key := ""
		if i > 0 {
			key = fmt.Sprintf("cut-%d", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := g.call(t, body, key)
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}()
	}
	// Every provider is called (so every hold is written) and output is
	// flowing: cut the store.
	for deadline := time.Now().Add(10 * time.Second); r.up.Calls() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	r.proxy.Cut()
	wg.Wait()
	for _, a := range answers {
		if a.status != 200 || a.cost <= 0 {
			t.Fatalf("an answer during the cut: %d %s", a.status, a.body)
		}
	}
	time.Sleep(2 * time.Second)
	r.proxy.Restore()
	// The keyed records complete once the store is back: a retry replays.
	deadline := time.Now().Add(30 * time.Second)
	for _, k := range []string{"cut-1", "cut-2"} {
		for {
			a := g.call(t, streamBody, k)
			if a.status == 200 && a.replayed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("retry of %s after the store came back: %d %s", k, a.status, a.body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The finisher bills within its backoff of the store's return.
	r.checkBilledOnce(answers, true)
	if got := r.up.Calls(); got != 3 {
		t.Errorf("upstream calls %d, want 3", got)
	}
}

// TestStoppedOwner: the instance running a keyed stream is stopped
// (SIGSTOP) past its lease; a retry on another instance does not run the
// request again; after SIGCONT the first instance finishes, stores and
// bills the answer once, and the retry then replays it.
func TestStoppedOwner(t *testing.T) {
	r := newFaultRig(t)
	// The stream lasts 3 s after its first chunk, so that a is stopped
	// mid-answer however late the signal lands on a loaded machine.
	r.up.SetDefault(providertest.Response{Text: []string{"a", "b", "c", "d"}, ChunkDelay: time.Second})
	a, b := r.start(), r.start()
	first := make(chan result, 1)
	go func() { first <- a.call(t, streamBody, "stopped") }()
	// a calls the provider only once its record is marked started (and
	// the provider sends its first chunk at once): output has started.
	for deadline := time.Now().Add(20 * time.Second); r.up.Calls() < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the provider was not called within 20s")
		}
	}
	a.Cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(2500 * time.Millisecond) // past the 1s lease
	if got := b.call(t, streamBody, "stopped"); got.status != 409 {
		t.Errorf("retry while the owner is stopped: %d %s, want a 409", got.status, got.body)
	}
	a.Cmd.Process.Signal(syscall.SIGCONT)
	got := <-first
	if got.status != 200 || got.cost <= 0 {
		t.Fatalf("the stopped owner's answer: %d %s", got.status, got.body)
	}
	var replay result
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if replay = b.call(t, streamBody, "stopped"); replay.status == 200 {
			break
		}
	}
	if replay.status != 200 || !replay.replayed || replay.cost != got.cost {
		t.Errorf("retry after SIGCONT: %d replayed=%v cost %v, want the stored answer", replay.status, replay.replayed, replay.cost)
	}
	r.checkBilledOnce([]result{got}, true)
	if n := r.up.Calls(); n != 1 {
		t.Errorf("upstream calls %d, want 1", n)
	}
}

// TestInvocationWaitsForItsOwnWrites: under Lambda an invocation stays
// open after its answer while its own finishing writes are being retried
// (here a bill whose every UpdateItem loses its answer), until its
// deadline less 5 s; the next invocation in the same execution
// environment (a 401) is not held by the earlier one's writes.
func TestInvocationWaitsForItsOwnWrites(t *testing.T) {
	endpoint, table := newTable(t)
	proxy, err := faultproxy.New(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetGentleUpstream(true) // fault the link, not dynalite
	t.Cleanup(func() { proxy.Close() })
	const timeout = 8 // seconds: an invocation with pending writes is held for 3
	emu := startEmulator(t, []string{
		"BUZZGATE_STORE=dynamodb",
		"BUZZGATE_TABLE=" + table,
		"AWS_ENDPOINT_URL_DYNAMODB=" + proxy.URL(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=x",
		"AWS_SECRET_ACCESS_KEY=x",
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", timeout),
	})
	timed := func(event string) (*rie.Response, time.Duration) {
		start := time.Now()
		r := invokeEvent(t, emu, event)
		return r, time.Since(start)
	}
	// A first request seeds the account and caches the key.
	if r, _ := timed("chat-completion.json"); r.StatusCode != 200 {
		t.Fatalf("first request: %d %s", r.StatusCode, r.Body)
	}
	proxy.DropResponses(1_000_000, faultproxy.DynamoDBOp("UpdateItem"))
	r, held := timed("chat-completion.json")
	if r.StatusCode != 200 {
		t.Fatalf("the request whose bill fails: %d %s", r.StatusCode, r.Body)
	}
	if held < 2*time.Second {
		t.Errorf("the invocation whose bill is being retried ended after %v: not held for its own writes", held)
	}
	r, took := timed("chat-completion-bad-key.json")
	if r.StatusCode != 401 {
		t.Fatalf("bad key: %d %s", r.StatusCode, r.Body)
	}
	if took > held/2 {
		t.Errorf("a 401 after it took %v (the invocation before was held %v): held by another request's writes", took, held)
	}
	if n := strings.Count(emu.Output(), "finishing steps still pending at the invocation's end"); n != 1 {
		t.Errorf("%d invocations ended with writes pending, want 1 (the one whose bill failed)", n)
	}
	proxy.DropResponses(0, nil)
}

// TestRateLimitAcrossProcesses: two gateway processes on one DynamoDB
// table share a project's rpm: of 30 requests at once, spread over both,
// exactly the 10 the limit allows are answered within the minute, and the
// rest are 429 rate_limited before any provider call.
func TestRateLimitAcrossProcesses(t *testing.T) {
	r := newFaultRig(t)
	cfg, err := os.ReadFile(r.config)
	if err != nil {
		t.Fatal(err)
	}
	limited := strings.Replace(string(cfg), "    keys: [{key: "+faultKey+"}]\n", "    keys: [{key: "+faultKey+"}]\n    rpm: 10\n", 1)
	if limited == string(cfg) {
		t.Fatal("the rig's config has no project to limit")
	}
	if err := os.WriteFile(r.config, []byte(limited), 0o600); err != nil {
		t.Fatal(err)
	}
	gs := []*gatewayProc{r.start(), r.start()}
	// The limit counts in UTC minutes: start early in one, so that all
	// 30 requests fall in it.
	if s := time.Now().UTC().Second(); s > 40 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		wg       sync.WaitGroup
	)
	for i := range 30 {
		wg.Go(func() {
			a := gs[i%2].call(t, plainBody, "")
			mu.Lock()
			statuses[a.status]++
			mu.Unlock()
			if a.status == 429 && !strings.Contains(a.body, "rate_limited") {
				t.Errorf("a 429 that is not rate_limited: %s", a.body)
			}
		})
	}
	wg.Wait()
	if statuses[200] != 10 || statuses[429] != 20 {
		t.Errorf("statuses %v, want 10 answered and 20 rate_limited", statuses)
	}
	if got := r.up.Calls(); got != 10 {
		t.Errorf("%d provider calls, want 10", got)
	}
}

// TestBudgetAcrossProcesses: two gateway processes on one DynamoDB table
// share a project's budget: answers from either count, and once three of
// them spent it, the next request on either process is a 402
// budget_exceeded, before any provider call.
func TestBudgetAcrossProcesses(t *testing.T) {
	r := newFaultRig(t)
	cfg, err := os.ReadFile(r.config)
	if err != nil {
		t.Fatal(err)
	}
	// Each answer costs 14,000 nano-USD: the third reaches 40,000 nano-USD
	// and spends the budget.
	budgeted := strings.Replace(string(cfg), "    keys: [{key: "+faultKey+"}]\n", "    keys: [{key: "+faultKey+"}]\n    budget: {amount: 0.00004, period: month}\n", 1)
	if budgeted == string(cfg) {
		t.Fatal("the rig's config has no project to budget")
	}
	if err := os.WriteFile(r.config, []byte(budgeted), 0o600); err != nil {
		t.Fatal(err)
	}
	gs := []*gatewayProc{r.start(), r.start()}
	for i := range 3 {
		if a := gs[i%2].call(t, plainBody, ""); a.status != 200 {
			t.Fatalf("answer %d: %d %s", i, a.status, a.body)
		}
	}
	for i, g := range gs {
		if a := g.call(t, plainBody, ""); a.status != 402 || !strings.Contains(a.body, "budget_exceeded") {
			t.Errorf("process %d after the budget is spent: %d %s", i, a.status, a.body)
		}
	}
	if got := r.up.Calls(); got != 3 {
		t.Errorf("%d provider calls, want 3", got)
	}
}
