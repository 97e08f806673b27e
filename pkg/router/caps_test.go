package router

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// withCaps is w's router made again over its fakes, fake n saying caps[n].
func (w *world) withCaps(t *testing.T, caps map[string]llm.Caps) *Router {
	t.Helper()
	providers := map[string]llm.Provider{}
	for n, f := range w.fakes {
		f.caps = caps[n]
		providers[n] = f
	}
	r, err := New(w.cfg, providers, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCaps: the plan reads what each route's adapter can do from its Caps,
// read once when the router is made: the protocols it takes as they are
// (Speaks), and the output limit of a request that sets none (the
// adapter's own, else the route's max_output_tokens).
func TestCaps(t *testing.T) {
	tests := []struct {
		name      string
		caps      map[string]llm.Caps
		routeMax  map[string]int // route max_output_tokens by provider
		only      []string       // provider.only
		messages  bool           // Speaks(ProtoMessages)
		responses bool           // Speaks(ProtoResponses)
		most      int64
		mostKnown bool
	}{
		{name: "chat only, no limits", caps: nil},
		{name: "one native route", caps: map[string]llm.Caps{"c": {Native: llm.ProtoMessages}}, messages: true},
		{name: "native route not selected", caps: map[string]llm.Caps{"c": {Native: llm.ProtoMessages}}, only: []string{"a", "b"}},
		{name: "responses route", caps: map[string]llm.Caps{"a": {Native: llm.ProtoResponses}}, responses: true},
		{name: "every route limited", routeMax: map[string]int{"a": 100, "b": 200, "c": 300, "d": 50},
			caps: map[string]llm.Caps{"b": {Native: llm.ProtoMessages, MaxOutputTokens: 4096}}, messages: true, most: 4096, mostKnown: true},
		{name: "the adapter's limit replaces the route's", routeMax: map[string]int{"a": 100, "b": 9000},
			caps: map[string]llm.Caps{"b": {MaxOutputTokens: 4096}}, only: []string{"a", "b"}, most: 4096, mostKnown: true},
		{name: "a route with no limit", routeMax: map[string]int{"a": 100},
			caps: map[string]llm.Caps{"b": {MaxOutputTokens: 4096}}, only: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, nil, func(cfg *catalog.Config) {
				for i := range cfg.Models[0].Routes {
					rt := &cfg.Models[0].Routes[i]
					rt.MaxOutputTokens = tt.routeMax[rt.Provider]
				}
			})
			r := w.withCaps(t, tt.caps)
			plan, err := r.Plan(Target{Model: "m", Provider: llm.ProviderPreferences{Only: tt.only}}, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Speaks(llm.ProtoMessages); got != tt.messages {
				t.Errorf("Speaks(messages) %v, want %v", got, tt.messages)
			}
			if got := plan.Speaks(llm.ProtoResponses); got != tt.responses {
				t.Errorf("Speaks(responses) %v, want %v", got, tt.responses)
			}
			most, ok := plan.MaxOutputTokens()
			if most != tt.most || ok != tt.mostKnown {
				t.Errorf("MaxOutputTokens %d, %v, want %d, %v", most, ok, tt.most, tt.mostKnown)
			}
			for range 3 {
				r.TokenCounters(plan)
			}
			for n, f := range w.fakes {
				// Once by newWorld's router, once by this one; never
				// when planning.
				if f.nCaps != 2 {
					t.Errorf("%s: Caps called %d times, want 2", n, f.nCaps)
				}
			}
		})
	}
}

// reportStream is a fakeStream with a report of its own.
type reportStream struct {
	*fakeStream
	report llm.StreamReport
}

func (s *reportStream) Report() llm.StreamReport { return s.report }

// reporting is a fake provider whose streams report what report says.
type reporting struct {
	*fake
	report llm.StreamReport
}

func (p reporting) ChatStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	st, err := p.fake.ChatStream(ctx, req)
	if err != nil {
		return nil, err
	}
	return &reportStream{fakeStream: st.(*fakeStream), report: p.report}, nil
}

// TestStreamReport: the answer's dropped fields are the stream's report of
// them, and an answer that ended without a usage chunk is billed on the
// usage its stream reported so far.
func TestStreamReport(t *testing.T) {
	cut := step{out: []string{"Hel", "lo"}, end: llm.ErrStreamCut}
	for _, tt := range []struct {
		name    string
		step    step
		report  llm.StreamReport
		dropped []string
		prompt  int
		est     bool
	}{
		{name: "nothing reported", step: cut, est: true},
		{name: "dropped and early usage", step: cut,
			report:  llm.StreamReport{Dropped: []string{"logit_bias", "messages[].name"}, Usage: &llm.Usage{PromptTokens: 42, TotalTokens: 42}},
			dropped: []string{"logit_bias", "messages[].name"}, prompt: 42, est: true},
		{name: "a usage chunk supersedes the report", step: ok,
			report: llm.StreamReport{Usage: &llm.Usage{PromptTokens: 42, CompletionTokens: 1, TotalTokens: 43}}, prompt: 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, map[string][]step{"a": {tt.step}})
			providers := map[string]llm.Provider{}
			for n, f := range w.fakes {
				providers[n] = f
			}
			providers["a"] = reporting{fake: w.fakes["a"], report: tt.report}
			r, err := New(w.cfg, providers, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := decode(t, plain)
			plan, err := r.Plan(TargetOf(req), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			ans, _, err := r.Start(context.Background(), plan, req)
			if err != nil {
				t.Fatal(err)
			}
			defer ans.Close()
			if !cmp.Equal(ans.Dropped, tt.dropped) {
				t.Errorf("Dropped %v, want %v", ans.Dropped, tt.dropped)
			}
			for {
				if _, err := ans.Next(); err != nil {
					break
				}
			}
			u := ans.Usage()
			if tt.prompt != 0 && u.PromptTokens != tt.prompt {
				t.Errorf("prompt tokens %d, want %d", u.PromptTokens, tt.prompt)
			}
			if u.Estimated != tt.est {
				t.Errorf("Estimated %v, want %v", u.Estimated, tt.est)
			}
		})
	}
}
