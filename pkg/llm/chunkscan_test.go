package llm

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

var deltaSeeds = []string{
	`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Let me think."},"finish_reason":null}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"reasoning":"hmm","reasoning_details":[{"type":"x"}]},"finish_reason":null}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"reasoning":{"summary":"odd"},"reasoning_content":null}}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"Hello \"w\"\n\u00e9\ud83d\ude00 \ud800"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"c","created":1735689600,"model":"up","system_fingerprint":"fp","service_tier":"default","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"id":"c","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":null}]}`,
	`{"choices":[{"index":1,"delta":{"function_call":{"name":"f","arguments":""},"refusal":"no"},"logprobs":{"content":[{"token":"a","logprob":-0.1}],"refusal":null}}]}`,
	`{"error":{"message":"boom"}}`,
	`{"error":null,"usage":null,"choices":null}`,
	` {"ID":"x"} `,
	`{"id":"a","id":"b"}`,
	`{"choices":[{"index":0},{"index":0}],"choices":[{"index":1}]}`,
	`{"created":1.5}`,
	`{"created":1e3}`,
	`{"created":-0}`,
	`{"created":01}`,
	`{"created":99999999999999999999}`,
	`{"choices":[{"index":3000000000}]}`,
	`{"id":"\u0069d"}`,
	`{"\u0069d":"x"}`,
	`{"id":"a\xffb"}`,
	`{"x":"a\xffb","id":"ok"}`,
	`{"x":[1,2,{"y":[true,false,null,-1.5e+3]}],"id":"ok"}`,
	`{"x":tru}`,
	`{"x":"\q"}`,
	`{"x":"a` + "\x01" + `"}`,
	`{"id":"x"}x`,
	`{"id":"x",}`,
	`[1]`,
	`null`,
	`{}`,
	`{"choices":[null]}`,
	`{"choices":[{"delta":null,"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"delta":{"content":null,"tool_calls":[]}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":null,"index":null}]}}]}`,
	`{"ſervice_tier":"x"}`,
	`{"model":5}`,
	`{"choices":{}}`,
}

// FuzzDecodeDelta checks the fast chunk decoder against encoding/json: the
// same result and the same success or failure.
func FuzzDecodeDelta(f *testing.F) {
	for _, s := range deltaSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var wire chat.UpstreamChunk
		wantErr := json.Unmarshal(raw, &wire)
		var want chunkHead
		typed(&wire, &want)
		s := scanner{b: raw}
		var got chunkHead
		fast := s.chunk(&got, nil)
		if fast && wantErr != nil {
			t.Fatalf("fast path accepted %q, encoding/json says %v", raw, wantErr)
		}
		if fast && !reflect.DeepEqual(got, want) {
			t.Fatalf("fast path differs on %q:\n got %+v\nwant %+v", raw, got, want)
		}
		var again chunkHead
		err := decodeChunk(raw, &again, nil)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(again, want)) {
			t.Fatalf("decodeChunk(%q) = %+v, %v; want %+v, %v", raw, again, err, want, wantErr)
		}
		// Strings shared from an earlier chunk, the same or not, change
		// nothing in the result.
		same := &chunkStrings{}
		same.remember(&again)
		for _, like := range []*chunkStrings{same, {"chatcmpl-1", "m", "fp_1", "default"}} {
			var shared chunkHead
			err := decodeChunk(raw, &shared, like)
			if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(shared, want)) {
				t.Fatalf("decodeChunk(%q) sharing %+v = %+v, %v; want %+v, %v", raw, *like, shared, err, want, wantErr)
			}
		}
	})
}

// TestDecodeDeltaFastPath: the chunks upstreams send take the fast path.
func TestDecodeDeltaFastPath(t *testing.T) {
	for _, s := range deltaSeeds[:8] {
		sc := scanner{b: []byte(s)}
		var h chunkHead
		if !sc.chunk(&h, nil) {
			t.Errorf("fast path refused %s", s)
		}
	}
}

func BenchmarkParseChunk(b *testing.B) {
	raw := []byte(`{"id":"chatcmpl-mock0000000000000001","object":"chat.completion.chunk","created":1735689600,"model":"mock-model","choices":[{"index":0,"delta":{"content":"Buzzgate is a gateway that sends each request "},"logprobs":null,"finish_reason":null}]}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseChunk(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same chunk again and again through one stream's parser, as a
	// provider's chunks repeat their id and model.
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		var p ChunkParser
		for b.Loop() {
			if _, err := p.Parse(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w chat.UpstreamChunk
			if err := json.Unmarshal(raw, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w chat.UpstreamChunk
			if err := jsonv2.Unmarshal(raw, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// parseUsageJSON is ParseUsage by encoding/json alone.
func parseUsageJSON(raw []byte) (Usage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Usage{}, err
	}
	u, ok := scanUsage([]byte(`{}`))
	if !ok {
		panic("scanUsage refused {}")
	}
	take := func(name string) int {
		v, ok := m[name]
		if !ok {
			return 0
		}
		delete(m, name)
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 0 || f > math.MaxInt32 {
			return 0
		}
		return int(f)
	}
	u.PromptTokens = take("prompt_tokens")
	u.CompletionTokens = take("completion_tokens")
	u.TotalTokens = take("total_tokens")
	delete(m, "cost")
	delete(m, "estimated")
	if u.TotalTokens < u.PromptTokens+u.CompletionTokens {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	if len(m) > 0 {
		u.Extra = m
	}
	readDetailsJSON(&u)
	return u, nil
}

// readDetailsJSON is Usage.readDetails by encoding/json alone.
func readDetailsJSON(u *Usage) {
	if raw, ok := u.Extra["prompt_tokens_details"]; ok {
		d := objectOf(raw)
		u.CachedTokens = detailCount(d["cached_tokens"])
		u.CacheWriteTokens = detailCount(d["cache_write_tokens"])
		u.CacheWrite1hTokens = detailCount(d["cache_write_1h_tokens"])
	}
	if raw, ok := u.Extra["completion_tokens_details"]; ok {
		u.ReasoningTokens = detailCount(objectOf(raw)["reasoning_tokens"])
	}
	if raw, ok := u.Extra[ServerToolUse]; ok {
		u.ServerToolCalls = toolCalls(objectOf(raw))
	}
}

// FuzzScanUsage checks ParseUsage's fast path against encoding/json.
func FuzzScanUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}`,
		`{"prompt_tokens":10,"completion_tokens":2,"total_tokens":1,"cost":5,"estimated":true,"prompt_tokens_details":{"cached_tokens":3},"x":[1, 2]}`,
		`{"prompt_tokens":1.5,"completion_tokens":-2,"total_tokens":"3"}`,
		`{"prompt_tokens":null,"prompt_tokens":4}`,
		`{"a":1,"a":2}`,
		`{"\u0061":1}`,
		`{"` + "\xff" + `":1}`,
		`{"prompt_tokens":99999999999}`,
		`null`, `[]`, `{}`, `{"cost":1,"estimated":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := parseUsageJSON(raw)
		got, ok := scanUsage(raw)
		if ok && wantErr != nil {
			t.Fatalf("fast path accepted %q, encoding/json says %v", raw, wantErr)
		}
		if ok && !reflect.DeepEqual(normalUsage(got), normalUsage(want)) {
			t.Fatalf("fast path differs on %q:\n got %+v\nwant %+v", raw, got, want)
		}
		all, err := ParseUsage(raw)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(normalUsage(all), normalUsage(want))) {
			t.Fatalf("ParseUsage(%q) = %+v, %v; want %+v, %v", raw, all, err, want, wantErr)
		}
	})
}

// normalUsage makes Extra's raw values comparable as strings.
func normalUsage(u Usage) any {
	extra := map[string]string{}
	for k, v := range u.Extra {
		extra[k] = string(v)
	}
	u.Extra = nil
	return []any{u, extra}
}

func BenchmarkParseUsage(b *testing.B) {
	raw := []byte(`{"prompt_tokens":12,"completion_tokens":40,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":0}}`)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseUsage(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseUsageJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]jsontext.Value
			if err := jsonv2.Unmarshal(raw, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestChunkParserSharesRepeatedStrings: the chunks of one stream share the
// strings they repeat (one copy, fewer allocations), and a chunk that
// changes one gets its own.
func TestChunkParserSharesRepeatedStrings(t *testing.T) {
	chunk := func(id, content string) []byte {
		return []byte(`{"id":"` + id + `","object":"chat.completion.chunk","created":1,"model":"mock-model","system_fingerprint":"fp_1","service_tier":"default","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}`)
	}
	var p ChunkParser
	first, err := p.Parse(chunk("chatcmpl-1", "Hello"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Parse(chunk("chatcmpl-1", " world"))
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(second.ID) != unsafe.StringData(first.ID) || unsafe.StringData(second.Model) != unsafe.StringData(first.Model) {
		t.Error("the second chunk's id and model are copies, not the first chunk's strings")
	}
	if second.ID != "chatcmpl-1" || second.Model != "mock-model" || second.SystemFingerprint != "fp_1" || second.ServiceTier != "default" {
		t.Errorf("second chunk %+v", second)
	}
	changed, err := p.Parse(chunk("chatcmpl-2", "!"))
	if err != nil || changed.ID != "chatcmpl-2" || changed.Model != "mock-model" {
		t.Fatalf("a chunk with another id: %+v, %v", changed, err)
	}
	// A chunk without an id has none (the earlier one is only a string to
	// share), and the one after it still shares the earlier string.
	if bare, err := p.Parse([]byte(`{"choices":[{"index":0,"delta":{"content":"x"}}]}`)); err != nil || bare.ID != "" || bare.Model != "" {
		t.Fatalf("a chunk without id and model: %q %q, %v; want empty", bare.ID, bare.Model, err)
	}
	after, err := p.Parse(chunk("chatcmpl-2", "?"))
	if err != nil || unsafe.StringData(after.ID) != unsafe.StringData(changed.ID) {
		t.Errorf("after a chunk without an id: %q %v, not the earlier string", after.ID, err)
	}
	raw := chunk("chatcmpl-2", "again")
	alone := testing.AllocsPerRun(100, func() { ParseChunk(raw) })
	shared := testing.AllocsPerRun(100, func() { p.Parse(raw) })
	if shared > alone-4 {
		t.Errorf("a repeated chunk: %v allocations with the stream's parser, %v alone; want 4 fewer (id, model, fingerprint, tier)", shared, alone)
	}
}

// TestChunkParserUsage: a stream's first usage chunk is read into the
// parser, without an allocation of its own; a later one gets its own, so
// the first chunk's usage stays what it said.
func TestChunkParserUsage(t *testing.T) {
	usage := func(prompt string) []byte {
		return []byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":` + prompt + `,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`)
	}
	var p ChunkParser
	first, err := p.Parse(usage("10"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Parse(usage("20"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage != &p.usage.u || second.Usage == first.Usage {
		t.Error("the first usage is not the parser's, or the second shares it")
	}
	want := func(prompt int) *Usage {
		return &Usage{PromptTokens: prompt, CompletionTokens: 2, TotalTokens: prompt + 2, CachedTokens: 1,
			Extra: map[string]json.RawMessage{"prompt_tokens_details": json.RawMessage(`{"cached_tokens":1}`)}}
	}
	if diff := cmp.Diff(want(10), first.Usage); diff != "" {
		t.Errorf("first usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want(20), second.Usage); diff != "" {
		t.Errorf("second usage (-want +got):\n%s", diff)
	}
	if c, err := p.Parse([]byte(`{"id":"c","choices":[],"usage":null}`)); err != nil || c.Usage != nil {
		t.Errorf("usage null: %+v, %v; want none", c.Usage, err)
	}
	raw := []byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	alone := testing.AllocsPerRun(100, func() { ParseChunk(raw) })
	shared := testing.AllocsPerRun(100, func() {
		p.usage.used = false // each run the stream's first usage chunk
		p.Parse(raw)
	})
	if shared > alone-1 {
		t.Errorf("a stream's first usage chunk: %v allocations with the stream's parser, %v alone; want one fewer", shared, alone)
	}
}
