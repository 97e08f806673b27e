package router

import (
	"testing"
	"time"
)

// TestSortRemembersATimeout: under provider.sort "latency" (and the :nitro
// suffix, throughput) a provider that has just failed its
// first_token_timeout counts as measured and slow (the timeout is its
// latency sample), so a provider whose first output was measured sorts
// ahead of it. Before, it stayed "unmeasured", sorted first, and every
// later request paid the whole first-token timeout on it again.
func TestSortRemembersATimeout(t *testing.T) {
	// a hangs until its first_token_timeout (200ms in newWorld) ends the call.
	w := newWorld(t, map[string][]step{"a": {{hang: true}}})
	var tick time.Time = time.Unix(1000, 0)
	w.r.now = func() time.Time { tick = tick.Add(time.Millisecond); return tick }

	first := withGateway(`"provider":{"sort":"latency","only":["a","b"]}`)
	ans, err := run(w.r, decode(t, first), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := ans.Next(); err != nil {
			break
		}
	}
	ans.Close()
	if ans.Provider != "b" || w.fakes["a"].Calls() != 1 {
		t.Fatalf("first request answered by %s (a called %d times), want b after a timed out", ans.Provider, w.fakes["a"].Calls())
	}

	for _, body := range []string{
		first,
		`{"model":"m:nitro","messages":[{"role":"user","content":"hi"}],"provider":{"only":["a","b"]}}`,
	} {
		plan, err := w.r.Plan(TargetOf(decode(t, body)), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, c := range plan.Candidates {
			order = append(order, c.Route.Provider)
		}
		if order[0] != "b" {
			t.Errorf("%s\n  order after a timed out and b answered = %v, want b first", body, order)
		}
	}
}
