package llm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// PriceOf prices each part of the prompt at its own price, clamping
// details that do not add up (an upstream's bug) to the prompt's size.
func TestPriceOf(t *testing.T) {
	p := Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	for _, c := range []struct {
		name  string
		usage string
		want  float64
	}{
		{"no details", `{"prompt_tokens":1000,"completion_tokens":100}`, 0.0045},
		{"reads and writes", `{"prompt_tokens":9112,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":9000,"cache_write_tokens":100}}`, 0.003711},
		{"reasoning is output", `{"prompt_tokens":10,"completion_tokens":50,"completion_tokens_details":{"reasoning_tokens":30}}`, 0.00078},
		{"reads beyond the prompt", `{"prompt_tokens":10,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":50,"cache_write_tokens":5}}`, 0.000003},
		{"writes beyond the rest", `{"prompt_tokens":10,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":4,"cache_write_tokens":50}}`, 0.0000237},
		{"garbage details", `{"prompt_tokens":10,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":"x","cache_write_tokens":-3}}`, 0.00003},
	} {
		u, err := ParseUsage(json.RawMessage(c.usage))
		if err != nil {
			t.Fatal(err)
		}
		if got := PriceOf(u, p); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// referenceUsage is Usage as encoding/json would encode it (its cost a
// USD), built from encoding/json's pieces only: json.Marshal of a Usage would call
// Usage.MarshalJSON, the encoder under test, and compare it with itself.
type referenceUsage Usage

func (u referenceUsage) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	num := func(v any) error {
		x, err := json.Marshal(v)
		b.Write(x)
		return err
	}
	b.WriteString(`{"prompt_tokens":`)
	num(u.PromptTokens)
	b.WriteString(`,"completion_tokens":`)
	num(u.CompletionTokens)
	b.WriteString(`,"total_tokens":`)
	num(u.TotalTokens)
	b.WriteString(`,"cost":`)
	if err := num(USD(u.Cost)); err != nil {
		return nil, err
	}
	if u.Estimated {
		b.WriteString(`,"estimated":true`)
	}
	if len(u.Extra) > 0 {
		extra, err := json.Marshal(u.Extra)
		if err != nil {
			return nil, err
		}
		if len(extra) > 2 {
			b.WriteByte(',')
			b.Write(extra[1 : len(extra)-1])
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// FuzzUsageJSON checks Usage's encoder against the encoding/json-built
// reference (referenceUsage), as json.Marshal puts it out.
func FuzzUsageJSON(f *testing.F) {
	f.Add(10, 2, 12, 0.0000075, false, "x", `{"a":"<&>"}`)
	f.Add(0, 0, 0, 1e-7, true, "", "")
	f.Add(1, 2, 3, 1e21, false, "k", `[1, 2]`)
	f.Add(1, 2, 3, -1e-9, false, "k", `"\u2028"`)
	f.Add(-5, 1<<40, 3, 9.2e-5, true, "a<>&\u2028", ` { "x" : "<\u2029" } `)
	f.Add(1, 2, 3, 3e21, false, "", "")
	f.Add(1, 2, 3, 1e-6, false, "", "")
	f.Add(1, 2, 3, 9.99e-7, false, "", "")
	f.Fuzz(func(t *testing.T, p, c, tot int, cost float64, est bool, key, extra string) {
		u := Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: tot, Cost: cost, Estimated: est}
		if key != "" && json.Valid([]byte(extra)) {
			u.Extra = map[string]json.RawMessage{key: json.RawMessage(extra)}
		}
		want, wantErr := json.Marshal(referenceUsage(u))
		got, err := u.appendJSON(nil)
		if (err != nil) != (wantErr != nil) || (err == nil && !bytes.Equal(got, want)) {
			t.Fatalf("appendJSON = %s, %v; json.Marshal = %s, %v", got, err, want, wantErr)
		}
	})
}

// TestReadUsage: a usage member reads as nil when absent or null, as no
// counts reported when it is not a usage object, and otherwise with the
// counts of its details objects read once into their fields (a count that
// is missing or not a count reads as 0; a server tool counts when called).
func TestReadUsage(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		want      *Usage
	}{
		{"absent", ``, nil},
		{"null", `null`, nil},
		{"not an object", `5`, &Usage{}},
		{"malformed", `{"prompt_tokens":`, &Usage{}},
		{"counts", `{"prompt_tokens":3,"completion_tokens":2}`, &Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}},
		{"details", `{"prompt_tokens":9,"completion_tokens":40,"total_tokens":49,"prompt_tokens_details":{"cached_tokens":4,"cache_write_tokens":3,"cache_write_1h_tokens":2},"completion_tokens_details":{"reasoning_tokens":30},"server_tool_use":{"web_search_requests":2,"web_fetch_requests":0,"_requests":1,"x":3}}`,
			&Usage{PromptTokens: 9, CompletionTokens: 40, TotalTokens: 49, CachedTokens: 4, CacheWriteTokens: 3, CacheWrite1hTokens: 2, ReasoningTokens: 30,
				ServerToolCalls: map[string]int{"web_search": 2},
				Extra: map[string]json.RawMessage{
					"prompt_tokens_details":     json.RawMessage(`{"cached_tokens":4,"cache_write_tokens":3,"cache_write_1h_tokens":2}`),
					"completion_tokens_details": json.RawMessage(`{"reasoning_tokens":30}`),
					"server_tool_use":           json.RawMessage(`{"web_search_requests":2,"web_fetch_requests":0,"_requests":1,"x":3}`),
				}}},
		{"garbage details", `{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":"x","cache_write_tokens":-3,"cache_write_1h_tokens":1e10},"completion_tokens_details":[1],"server_tool_use":null}`,
			&Usage{PromptTokens: 1, TotalTokens: 1, Extra: map[string]json.RawMessage{
				"prompt_tokens_details":     json.RawMessage(`{"cached_tokens":"x","cache_write_tokens":-3,"cache_write_1h_tokens":1e10}`),
				"completion_tokens_details": json.RawMessage(`[1]`),
				"server_tool_use":           json.RawMessage(`null`),
			}}},
		{"escaped keys, through encoding/json", `{"prompt_tokens":2,"prompt_tokens_details":{"cached_tokens":1},"\u0078":1}`,
			&Usage{PromptTokens: 2, TotalTokens: 2, CachedTokens: 1, Extra: map[string]json.RawMessage{
				"prompt_tokens_details": json.RawMessage(`{"cached_tokens":1}`), "x": json.RawMessage(`1`),
			}}},
	} {
		if diff := cmp.Diff(c.want, ReadUsage(json.RawMessage(c.raw))); diff != "" {
			t.Errorf("%s: ReadUsage (-want +got):\n%s", c.name, diff)
		}
	}
}

// FuzzScanDetails checks the details objects' fast paths (scanCounts,
// scanToolCalls) against encoding/json.
func FuzzScanDetails(f *testing.F) {
	for _, s := range []string{
		`{"cached_tokens":4,"cache_write_tokens":3,"cache_write_1h_tokens":2,"audio_tokens":0}`,
		`{"cached_tokens":null,"cache_write_tokens":-3,"cache_write_1h_tokens":1e3}`,
		`{"cached_tokens":1,"cached_tokens":2}`, `{"Cached_tokens":1}`, `{"\u0063ached_tokens":1}`,
		`{"cached_tokens":99999999999,"reasoning_tokens":2147483648}`, `{"reasoning_tokens":2147483647}`,
		`{"web_search_requests":3,"web_fetch_requests":0,"_requests":1,"x":[1,{"a":2}]}`,
		`{"web_search_requests":1,"web_search_requests":0}`, `{"web_search_requests":1.5}`,
		`{"` + "\xff" + `_requests":1}`, `{"a_requests":2147483648}`,
		`null`, `[]`, `{}`, `5`, `{"a":1} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := objectOf(raw)
		for _, names := range [][]string{promptDetails, completionDetails} {
			got := make([]int, len(names))
			if scanCounts(raw, names, got) {
				for i, name := range names {
					if want := detailCount(d[name]); got[i] != want {
						t.Fatalf("scanCounts(%q): %s %d, encoding/json reads %d", raw, name, got[i], want)
					}
				}
			}
			all := make([]int, len(names))
			readCounts(raw, names, all)
			for i, name := range names {
				if want := detailCount(d[name]); all[i] != want {
					t.Fatalf("readCounts(%q): %s %d, encoding/json reads %d", raw, name, all[i], want)
				}
			}
		}
		if got, ok := scanToolCalls(raw); ok {
			if want := toolCalls(d); !reflect.DeepEqual(got, want) {
				t.Fatalf("scanToolCalls(%q) = %v, encoding/json reads %v", raw, got, want)
			}
		}
	})
}

// TestUsageSlot: the first usage read goes into the slot, null takes no
// slot, a later usage gets its own (the first stays what it said), and a
// nil slot reads as ReadUsage.
func TestUsageSlot(t *testing.T) {
	var s UsageSlot
	if u := s.Read(json.RawMessage(`null`)); u != nil || s.used {
		t.Fatalf("null: %+v, slot used %v", u, s.used)
	}
	first := s.Read(json.RawMessage(`{"prompt_tokens":1}`))
	second := s.Read(json.RawMessage(`{"prompt_tokens":2}`))
	if first != &s.u || second == first {
		t.Error("the first usage is not the slot's, or the second shares it")
	}
	if first.PromptTokens != 1 || second.PromptTokens != 2 {
		t.Errorf("prompt tokens %d and %d, want 1 and 2", first.PromptTokens, second.PromptTokens)
	}
	var none *UsageSlot
	if diff := cmp.Diff(ReadUsage(json.RawMessage(`{"completion_tokens":3}`)), none.Read(json.RawMessage(`{"completion_tokens":3}`))); diff != "" {
		t.Errorf("nil slot (-ReadUsage +Read):\n%s", diff)
	}
}
