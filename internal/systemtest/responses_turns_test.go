package systemtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/testclock"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// A Responses answer as these tests read it.
type rsAnswer struct {
	answer
	ID    string
	Store *bool // nil when the answer has no "store"
	Err   struct{ Message, Param string }
}

// respond posts a Responses body to base (a gateway instance's URL), with
// testKey unless header sets another Authorization.
func respond(t *testing.T, base, body string, header ...string) rsAnswer {
	t.Helper()
	a := rsAnswer{answer: callPath(t, base+"/api/v1/responses", body, header...)}
	var v struct {
		ID    string `json:"id"`
		Store *bool  `json:"store"`
		Error struct {
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(a.body), &v)
	a.ID, a.Store, a.Err.Message, a.Err.Param = v.ID, v.Store, v.Error.Message, v.Error.Param
	return a
}

// clip is s, cut short for a test's message.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func (a rsAnswer) stored() string {
	if a.Store == nil {
		return "absent"
	}
	return fmt.Sprint(*a.Store)
}

// getResponse is GET /api/v1/responses/{id} with key: its status and body.
func getResponse(t *testing.T, base, key, id string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/responses/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// turnBody is a Responses request body continuing prev ("" for none).
func turnBody(input, prev string, extra ...string) string {
	b := `{"model":"m","input":"` + input + `"`
	if prev != "" {
		b += `,"previous_response_id":"` + prev + `"`
	}
	for _, e := range extra {
		b += "," + e
	}
	return b + "}"
}

// answerNumbered answers each call with "answer <call>" and pad bytes more.
func answerNumbered(up *providertest.Server, pad int) {
	up.SetHandler(func(call int, _ providertest.Request) providertest.Response {
		return providertest.Response{Text: []string{fmt.Sprintf("answer %d", call)}, PadBytes: pad}
	})
}

// TestResponsesTurnsKeptOnce: a conversation of 35 turns, each continuing
// the one before on the other instance, sends the upstream the whole
// conversation in order, while each turn is kept once: what the store holds
// grows by about one turn's size per turn (the memory store, counted), not
// by the whole conversation so far. GET of each turn answers its own
// response as it was answered.
func TestResponsesTurnsKeptOnce(t *testing.T) {
	// 35 turns: three segments of the conversation (pkg/clientapi/responses/turns.go).
	const pad, turnCount = 2000, 35
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			store := sk.new(t)
			g := newGateway(t, setup{store: store})
			urls := []string{g.url, g.instance(t, store)}
			answerNumbered(g.ups[0], pad)
			mem, _ := store.(*memstore.Store)

			var growth []int64
			var turns []rsAnswer
			prev := ""
			for i := range turnCount {
				before := int64(0)
				if mem != nil {
					before = mem.TenantBytes("proj")
				}
				a := respond(t, urls[i%2], turnBody(fmt.Sprintf("question %d", i), prev))
				if a.status != 200 || a.stored() != "true" {
					t.Fatalf("turn %d: %d store %s %s", i, a.status, a.stored(), clip(a.body))
				}
				if mem != nil {
					growth = append(growth, mem.TenantBytes("proj")-before)
				}
				turns = append(turns, a)
				prev = a.ID
			}

			// The last turn's upstream messages: every question and answer
			// so far, in order.
			reqs := g.ups[0].Requests()
			msgs := reqs[len(reqs)-1].JSON["messages"].([]any)
			if len(msgs) != 2*turnCount-1 {
				t.Fatalf("the last turn's upstream messages: %d, want %d", len(msgs), 2*turnCount-1)
			}
			for i, m := range msgs {
				mm := m.(map[string]any)
				role, content := mm["role"], fmt.Sprint(mm["content"])
				want, ok := fmt.Sprintf("question %d", i/2), content == fmt.Sprintf("question %d", i/2)
				if i%2 == 1 {
					want = fmt.Sprintf("answer %d", i/2+1) + "xxx…"
					ok = role == "assistant" && strings.HasPrefix(content, fmt.Sprintf("answer %d", i/2+1)+"xxx")
				} else {
					ok = ok && role == "user"
				}
				if !ok {
					t.Errorf("the last turn's upstream message %d: %s %.20q, want %s", i, role, content, want)
				}
			}

			// Each turn is kept once: the last turn costs about what the
			// second did (a few more bytes of ids), not many times as much.
			if mem != nil && growth[turnCount-1] > growth[1]+1000 {
				t.Errorf("bytes the store grew by, turn by turn: %v; want each turn kept once (about the same each)", growth)
			}
			for i, a := range turns {
				status, body := getResponse(t, urls[(i+1)%2], testKey, a.ID)
				if status != 200 || body != a.body {
					t.Errorf("GET turn %d: %d %s\nwant the answer %s", i, status, clip(body), clip(a.body))
				}
			}
		})
	}
}

// TestResponsesConversationLimits: a conversation is continued only while
// what it sends upstream stays within server.max_body_bytes, and for at
// most 256 kept turns; past either, continuing it is a 400 naming
// previous_response_id, and nothing goes upstream.
func TestResponsesConversationLimits(t *testing.T) {
	t.Run("max_body_bytes", func(t *testing.T) {
		const limit = 16 << 10
		g := newGateway(t, setup{extraYAML: fmt.Sprintf("server: {max_body_bytes: %d}\n", limit)})
		answerNumbered(g.ups[0], 3000)
		prev := ""
		var refused *rsAnswer
		answered := 0
		for i := 0; i < 10 && refused == nil; i++ {
			a := respond(t, g.url, turnBody(fmt.Sprintf("question %d", i), prev))
			switch {
			case a.status == 400:
				refused = &a
			case a.status != 200:
				t.Fatalf("turn %d: %d %s", i, a.status, clip(a.body))
			default:
				answered++
			}
			prev = a.ID
		}
		if refused == nil || refused.Err.Param != "previous_response_id" || !strings.Contains(refused.Err.Message, "max_body_bytes") {
			t.Fatalf("ten turns of 3000 bytes with max_body_bytes %d: refusal %+v; want a 400 on previous_response_id naming max_body_bytes", limit, refused)
		}
		calls := g.ups[0].Requests()
		for i, r := range calls {
			if len(r.Body) > limit {
				t.Errorf("upstream request %d is %d bytes, over max_body_bytes %d", i, len(r.Body), limit)
			}
		}
		if len(calls) != answered || answered < 4 {
			t.Errorf("%d upstream calls for %d turns answered before the refusal; want one each, and the conversation continued while it fits (4 turns or more)", len(calls), answered)
		}
	})

	t.Run("turns", func(t *testing.T) {
		g := newGateway(t, setup{})
		prev := ""
		for i := range 257 {
			a := respond(t, g.url, turnBody("q", prev))
			if a.status != 200 {
				t.Fatalf("turn %d: %d %s", i+1, a.status, clip(a.body))
			}
			prev = a.ID
		}
		calls := g.ups[0].Calls()
		a := respond(t, g.url, turnBody("q", prev))
		if a.status != 400 || a.Err.Param != "previous_response_id" || !strings.Contains(a.Err.Message, "256") {
			t.Errorf("continuing a conversation of 257 kept turns: %d %s; want 400 on previous_response_id", a.status, clip(a.body))
		}
		if g.ups[0].Calls() != calls {
			t.Errorf("the refused turn went upstream")
		}
		// Its last turn is kept all the same.
		if status, _ := getResponse(t, g.url, testKey, prev); status != 200 {
			t.Errorf("GET the 257th turn: %d", status)
		}
	})

	t.Run("expired_turn", func(t *testing.T) {
		// Every turn is kept for the window from its own answer: once the
		// first has expired, the conversation cannot be continued from
		// any later one, though that one is still kept.
		clock := testclock.New(time.Now())
		g := newGateway(t, setup{now: clock.Now, extraYAML: "idempotency: {window: 1h}\n"})
		first := respond(t, g.url, turnBody("one", ""))
		clock.Advance(40 * time.Minute)
		second := respond(t, g.url, turnBody("two", first.ID))
		if first.status != 200 || second.status != 200 {
			t.Fatalf("turns: %d %d", first.status, second.status)
		}
		clock.Advance(30 * time.Minute) // the first turn's window has ended
		if status, _ := getResponse(t, g.url, testKey, second.ID); status != 200 {
			t.Errorf("GET the second turn inside its window: %d", status)
		}
		a := respond(t, g.url, turnBody("three", second.ID))
		if a.status != 400 || a.Err.Param != "previous_response_id" || !strings.Contains(a.Err.Message, first.ID) {
			t.Errorf("continuing a conversation whose first turn expired: %d %s; want 400 on previous_response_id naming %s", a.status, clip(a.body), first.ID)
		}
	})
}

// TestResponsesTurnNotKept: when the gateway cannot keep a turn (it is
// larger than max_response_bytes, the project's share of the memory store
// has no room for it, the store is down or does not answer), the answer is
// served all the same and says "store": false; the id is never readable
// (GET 404, continuing it 400 on previous_response_id), then or later: no
// write of it is left to retry in the background.
func TestResponsesTurnNotKept(t *testing.T) {
	notKept := func(t *testing.T, g *gateway, a rsAnswer) {
		t.Helper()
		if a.status != 200 || a.stored() != "false" {
			t.Fatalf("the answer whose turn cannot be kept: %d, store %s: %s", a.status, a.stored(), clip(a.body))
		}
		for i, app := range g.apps {
			if n := app.Finisher.Pending(); n != 0 {
				t.Errorf("instance %d has %d steps left to retry after the answer", i, n)
			}
		}
		g.settle(t)
		if status, body := getResponse(t, g.url, testKey, a.ID); status != 404 {
			t.Errorf("GET the turn not kept: %d %s", status, body)
		}
		next := respond(t, g.url, turnBody("more", a.ID))
		if next.status != 400 || next.Err.Param != "previous_response_id" {
			t.Errorf("continuing the turn not kept: %d %s", next.status, clip(next.body))
		}
	}

	t.Run("max_response_bytes", func(t *testing.T) {
		g := newGateway(t, setup{extraYAML: "idempotency: {max_response_bytes: 4096}\n"})
		g.ups[0].SetDefault(providertest.Response{PadBytes: 5000})
		notKept(t, g, respond(t, g.url, turnBody("big", "")))
		g.ups[0].SetDefault(providertest.Response{})
		small := respond(t, g.url, turnBody("small", ""))
		if small.stored() != "true" {
			t.Errorf("a small turn: store %s", small.stored())
		}
		if status, _ := getResponse(t, g.url, testKey, small.ID); status != 200 {
			t.Errorf("GET the small turn: %d", status)
		}
	})

	t.Run("memory_share", func(t *testing.T) {
		// The other project holds its fair share of the store (half); this
		// project's turn would need more than the rest.
		g := newGateway(t, setup{store: memstore.New(16 << 10)})
		g.ups[0].SetDefault(providertest.Response{PadBytes: 2500})
		other := respond(t, g.url, turnBody("theirs", ""), "Authorization", "Bearer "+otherProjectKey)
		if other.stored() != "true" {
			t.Fatalf("the other project's turn: %d store %s", other.status, other.stored())
		}
		g.ups[0].SetDefault(providertest.Response{PadBytes: 5000})
		notKept(t, g, respond(t, g.url, turnBody("ours", "")))
		if status, _ := getResponse(t, g.url, otherProjectKey, other.ID); status != 200 {
			t.Errorf("GET the other project's turn: %d", status)
		}
	})

	t.Run("store_down", func(t *testing.T) {
		store := &switchStore{Store: memstore.New(1 << 20)}
		g := newGateway(t, setup{store: store})
		store.set(storeDown)
		a := respond(t, g.url, turnBody("hello", ""))
		store.set(storeUp)
		notKept(t, g, a)

		// A stream: its response.created says what was asked, its
		// response.completed what was done.
		store.set(storeDown)
		events := streamResponses(t, g.url, turnBody("hello", "", `"stream":true`))
		store.set(storeUp)
		if s := events["response.created"]; s != "true" {
			t.Errorf("response.created: store %s, want true (asked)", s)
		}
		if s := events["response.completed"]; s != "false" {
			t.Errorf("response.completed: store %s, want false (not kept)", s)
		}
	})

	t.Run("store_hangs", func(t *testing.T) {
		store := &switchStore{Store: memstore.New(1 << 20)}
		g := newGateway(t, setup{store: store})
		store.set(storeHangs)
		a := respond(t, g.url, turnBody("hello", ""))
		store.set(storeUp)
		notKept(t, g, a)
	})
}

// streamResponses posts a streamed Responses body and returns, per event
// name, the store its response object says ("absent" without one).
func streamResponses(t *testing.T, base, body string) map[string]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string `json:"type"`
			Response *struct {
				Store *bool `json:"store"`
			} `json:"response"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil || ev.Response == nil {
			continue
		}
		out[ev.Type] = "absent"
		if ev.Response.Store != nil {
			out[ev.Type] = fmt.Sprint(*ev.Response.Store)
		}
	}
	return out
}

type storeMode int

const (
	storeUp storeMode = iota
	storeDown
	storeHangs // every write waits for its context to end
)

// switchStore is a store whose writes work, fail, or hang, as set.
type switchStore struct {
	idempotency.Store
	mu   sync.Mutex
	mode storeMode
}

func (s *switchStore) set(m storeMode) { s.mu.Lock(); s.mode = m; s.mu.Unlock() }

func (s *switchStore) fail(ctx context.Context) error {
	s.mu.Lock()
	m := s.mode
	s.mu.Unlock()
	switch m {
	case storeDown:
		return errDown
	case storeHangs:
		<-ctx.Done()
		return fmt.Errorf("%w: %w", idempotency.ErrUnavailable, ctx.Err())
	}
	return nil
}

func (s *switchStore) Reserve(ctx context.Context, rec *idempotency.Record, now time.Time) (*idempotency.Record, error) {
	if err := s.fail(ctx); err != nil {
		return nil, err
	}
	return s.Store.Reserve(ctx, rec, now)
}

func (s *switchStore) Complete(ctx context.Context, key, owner string, ans *idempotency.Answer) error {
	if err := s.fail(ctx); err != nil {
		return err
	}
	return s.Store.Complete(ctx, key, owner, ans)
}

// TestResponsesStoreFalse: a response asked with store false says so and
// is not kept: GET is a 404, and continuing it is the same 400 as for an
// id never answered. A response kept says "store": true, and GET answers
// it as it was answered.
func TestResponsesStoreFalse(t *testing.T) {
	g := newGateway(t, setup{})
	a := respond(t, g.url, turnBody("hello", "", `"store":false`))
	if a.status != 200 || a.stored() != "false" {
		t.Fatalf("store false: %d, store %s: %s", a.status, a.stored(), clip(a.body))
	}
	if status, _ := getResponse(t, g.url, testKey, a.ID); status != 404 {
		t.Errorf("GET a response asked with store false: %d", status)
	}
	next := respond(t, g.url, turnBody("more", a.ID))
	unknown := respond(t, g.url, turnBody("more", "resp_0123456789abcdef0123456789abcdef"))
	if next.status != 400 || next.Err.Param != "previous_response_id" ||
		unknown.status != 400 || strings.ReplaceAll(next.Err.Message, a.ID, "ID") != strings.ReplaceAll(unknown.Err.Message, "resp_0123456789abcdef0123456789abcdef", "ID") {
		t.Errorf("continuing a response asked with store false: %d %s\nand one never answered: %d %s; want the same 400",
			next.status, clip(next.body), unknown.status, clip(unknown.body))
	}

	kept := respond(t, g.url, turnBody("hello", ""))
	if kept.status != 200 || kept.stored() != "true" {
		t.Fatalf("store true: %d, store %s: %s", kept.status, kept.stored(), clip(kept.body))
	}
	if status, body := getResponse(t, g.url, testKey, kept.ID); status != 200 || body != kept.body {
		t.Errorf("GET the kept response: %d %s\nwant %s", status, clip(body), clip(kept.body))
	}
}
