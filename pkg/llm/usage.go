package llm

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Usage is an answer's token counts and its cost in USD. Extra keeps the
// fields of the upstream's usage object the gateway does not own
// (prompt_tokens_details, completion_tokens_details, ...), so they reach the
// client unchanged; the counts of them the gateway prices and reports are
// read into the fields between (ParseUsage reads them once).
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
	// CachedTokens, CacheWriteTokens and CacheWrite1hTokens are
	// prompt_tokens_details' cached_tokens, cache_write_tokens and
	// cache_write_1h_tokens as the upstream reported them (PromptParts and
	// CacheWrite1h clamp them to the prompt); ReasoningTokens is
	// completion_tokens_details.reasoning_tokens. Each is 0 when absent or
	// not a count.
	CachedTokens, CacheWriteTokens, CacheWrite1hTokens int
	ReasoningTokens                                    int
	// ServerToolCalls is the number of calls of each server tool the
	// usage counts (server_tool_use.<tool>_requests, ServerToolUse), by
	// the tool's name; nil when none.
	ServerToolCalls map[string]int
	Cost            float64
	// Estimated is true when the upstream reported no usage and the gateway
	// counted the tokens itself (about four bytes a token).
	Estimated bool
	Extra     map[string]json.RawMessage
}

// ReadUsage is an upstream's usage member raw as the hub carries it: nil
// when raw is empty or null, ParseUsage's Usage when raw is a usage object,
// and a zero Usage (no counts reported) when it is not one. The decoder
// that reads an upstream's usage calls it once; the layers after it read
// the struct.
func ReadUsage(raw json.RawMessage) *Usage { return (*UsageSlot)(nil).Read(raw) }

// UsageSlot keeps the usage a decoder reads of its stream (ReadUsage) in
// the decoder: the stream's first reading points into the slot, without an
// allocation of its own, and a later one gets its own, so that a usage
// read stays what it said. The zero value is ready; a nil slot is always
// taken. Not for concurrent use.
type UsageSlot struct {
	u    Usage
	used bool
}

// Read is ReadUsage(raw), into the slot when it is free.
func (s *UsageSlot) Read(raw json.RawMessage) *Usage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var u *Usage
	if s != nil && !s.used {
		u, s.used = &s.u, true
	} else {
		u = new(Usage)
	}
	readUsage(raw, u)
	return u
}

// readUsage is ReadUsage into u, for a raw that is neither empty nor null.
func readUsage(raw json.RawMessage, u *Usage) {
	p, err := ParseUsage(raw)
	if err != nil {
		p = Usage{}
	}
	*u = p
}

// ParseUsage reads an upstream usage object. Token counts that are missing or
// not numbers read as 0; cost and the gateway's own fields are dropped, so an
// upstream can never set the price.
func ParseUsage(raw json.RawMessage) (Usage, error) {
	if u, ok := scanUsage(raw); ok {
		return u, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Usage{}, err
	}
	var u Usage
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
	u.readDetails()
	return u, nil
}

// scanUsage is ParseUsage without encoding/json for a usage object whose
// keys have no escapes and appear once, and whose token counts are plain
// integers; ok is false for anything else (ParseUsage then decodes it).
// BenchmarkParseUsage keeps it: a quarter of encoding/json's allocations.
func scanUsage(raw []byte) (u Usage, ok bool) {
	s := scanner{b: raw}
	var seen fields
	tokens := [3]*int{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens}
	ok = s.object(func(key []byte, esc bool) bool {
		if esc || !utf8.Valid(key) {
			return false
		}
		switch k := string(key); k {
		case "prompt_tokens", "completion_tokens", "total_tokens":
			i := 0
			if k == "completion_tokens" {
				i = 1
			} else if k == "total_tokens" {
				i = 2
			}
			if !seen.first(uint(i)) {
				return false
			}
			var n int64
			if s.peek() == '-' || !s.integer(&n) || n > math.MaxInt32 {
				return false
			}
			*tokens[i] = int(n)
			return true
		case "cost", "estimated":
			if !seen.first(uint(3 + len(k)%2)) { // cost 3, estimated 4
				return false
			}
			return s.skip(1)
		default:
			var v json.RawMessage
			if !s.raw(&v) {
				return false
			}
			if u.Extra == nil {
				u.Extra = make(map[string]json.RawMessage, 2)
			}
			if _, dup := u.Extra[k]; dup {
				return false
			}
			u.Extra[k] = v
			return true
		}
	})
	if !ok {
		return Usage{}, false
	}
	if s.ws(); s.i != len(s.b) {
		return Usage{}, false
	}
	if u.TotalTokens < u.PromptTokens+u.CompletionTokens {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	u.readDetails()
	return u, true
}

// MarshalJSON writes the OpenAI usage object plus "cost" (a plain decimal,
// as USD writes it), with the upstream's extra fields after them in sorted
// order. The result is compact and HTML-escaped, as json.Marshal makes it,
// so callers may use it as is.
func (u Usage) MarshalJSON() ([]byte, error) {
	return u.appendJSON(make([]byte, 0, 96))
}

func (u Usage) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	b = append(b, `,"cost":`...)
	if math.IsNaN(u.Cost) || math.IsInf(u.Cost, 0) {
		if _, err := json.Marshal(u.Cost); err != nil {
			return nil, err
		}
	}
	b = AppendUSD(b, u.Cost)
	if u.Estimated {
		b = append(b, `,"estimated":true`...)
	}
	if len(u.Extra) > 0 {
		// encoding/json sorts map keys, which keeps the output deterministic.
		extra, err := json.Marshal(u.Extra)
		if err != nil {
			return nil, err
		}
		if len(extra) > 2 {
			b = append(b, ',')
			b = append(b, extra[1:len(extra)-1]...)
		}
	}
	return append(b, '}'), nil
}

// Prices are a route's prices in USD per million tokens: an uncached
// prompt token, an output token (reasoning included), a prompt token read
// from the provider's prompt cache, one written to it, and one written to
// a one-hour cache; and in USD per call, the server tools the provider
// bills by the call (Tools, by the tool's name as ServerToolCalls counts
// it).
type Prices struct {
	Input, Output, CacheRead, CacheWrite, CacheWrite1h float64
	Tools                                              map[string]float64
}

// PriceOf is the cost of usage u at prices p in USD, as the provider bills
// it: the prompt's cached reads, cache writes (those to a one-hour cache at
// their own price) and the rest each at their price (PromptParts), the
// completion at the output price, and each server tool call the usage
// counts (ServerToolCalls) at its price; rounded to whole nano-dollars as Cost
// is. A tool call without a price costs nothing: the gateway refuses a
// request that declares a billable tool no route prices before any call.
func PriceOf(u Usage, p Prices) float64 {
	uncached, read, write := u.PromptParts()
	write1h := u.CacheWrite1h()
	c := (float64(uncached)*p.Input + float64(read)*p.CacheRead + float64(write-write1h)*p.CacheWrite +
		float64(write1h)*p.CacheWrite1h + float64(u.CompletionTokens)*p.Output) / 1e6
	if len(p.Tools) > 0 {
		for tool, n := range u.ServerToolCalls {
			c += float64(n) * p.Tools[tool]
		}
	}
	return math.Round(c*1e9) / 1e9
}

// PromptParts splits the prompt tokens as the upstream reported them (in
// the Chat Completions shape every adapter gives): read from the
// provider's prompt cache (CachedTokens), written to it
// (CacheWriteTokens), and the rest. Each part is clamped so that the three
// add up to PromptTokens.
func (u Usage) PromptParts() (uncached, cacheRead, cacheWrite int) {
	cacheRead = min(u.CachedTokens, u.PromptTokens)
	cacheWrite = min(u.CacheWriteTokens, u.PromptTokens-cacheRead)
	return u.PromptTokens - cacheRead - cacheWrite, cacheRead, cacheWrite
}

// CacheWrite1h is the part of the cache writes (PromptParts) written to a
// one-hour cache: CacheWrite1hTokens, at most the cache writes.
func (u Usage) CacheWrite1h() int {
	_, _, write := u.PromptParts()
	return min(u.CacheWrite1hTokens, write)
}

// ServerToolUse is the member of a usage object that counts the calls of
// the provider's server tools, each as "<tool>_requests" (Anthropic's
// usage.server_tool_use; the adapters of other protocols count their
// answers' tool calls into the same shape).
const ServerToolUse = "server_tool_use"

// The counts read of the details objects, in the order of their fields.
var (
	promptDetails     = []string{"cached_tokens", "cache_write_tokens", "cache_write_1h_tokens"}
	completionDetails = []string{"reasoning_tokens"}
)

// readDetails sets the counts read from the details objects in Extra:
// CachedTokens to ReasoningTokens and ServerToolCalls.
func (u *Usage) readDetails() {
	if raw, ok := u.Extra["prompt_tokens_details"]; ok {
		var c [3]int
		readCounts(raw, promptDetails, c[:])
		u.CachedTokens, u.CacheWriteTokens, u.CacheWrite1hTokens = c[0], c[1], c[2]
	}
	if raw, ok := u.Extra["completion_tokens_details"]; ok {
		var c [1]int
		readCounts(raw, completionDetails, c[:])
		u.ReasoningTokens = c[0]
	}
	if raw, ok := u.Extra[ServerToolUse]; ok {
		calls, ok := scanToolCalls(raw)
		if !ok {
			calls = toolCalls(objectOf(raw))
		}
		u.ServerToolCalls = calls
	}
}

// readCounts sets dst[i] to the count names[i] of the details object raw
// (detailCount), by scanCounts or else by encoding/json.
func readCounts(raw json.RawMessage, names []string, dst []int) {
	if scanCounts(raw, names, dst) {
		return
	}
	d := objectOf(raw)
	for i, name := range names {
		dst[i] = detailCount(d[name])
	}
}

// scanCounts is readCounts without encoding/json for an object whose
// names are given once each and whose counts are plain integers or null;
// false (dst then partly set) for anything else. BenchmarkParseUsage keeps
// it, with scanUsage.
func scanCounts(raw []byte, names []string, dst []int) bool {
	s := scanner{b: raw}
	clear(dst)
	ok := s.fields(names, func(i int) bool {
		if i < 0 {
			return s.skip(1)
		}
		var n int64
		if s.peek() == '-' || !s.integer(&n) {
			return false
		}
		if n <= math.MaxInt32 {
			dst[i] = int(n)
		}
		return true
	})
	s.ws()
	return ok && s.i == len(s.b)
}

// scanToolCalls is toolCalls of raw's members without encoding/json, for
// an object whose names have no escapes and whose "<tool>_requests"
// members are given once each as plain integers or null; ok is false for
// anything else.
func scanToolCalls(raw []byte) (calls map[string]int, ok bool) {
	s := scanner{b: raw}
	ok = s.object(func(key []byte, esc bool) bool {
		if esc || !utf8.Valid(key) {
			return false
		}
		tool, ok := bytes.CutSuffix(key, []byte("_requests"))
		if !ok || len(tool) == 0 {
			return s.skip(1)
		}
		var n int64
		if s.peek() == '-' || !s.integer(&n) {
			return false
		}
		if calls == nil {
			calls = make(map[string]int, 2)
		}
		if _, dup := calls[string(tool)]; dup {
			return false
		}
		calls[string(tool)] = int(min(n, math.MaxInt32+1))
		return true
	})
	s.ws()
	if !ok || s.i != len(s.b) {
		return nil, false
	}
	for tool, n := range calls {
		if n <= 0 || n > math.MaxInt32 {
			delete(calls, tool)
		}
	}
	if len(calls) == 0 {
		calls = nil
	}
	return calls, true
}

// toolCalls is the calls of each server tool that a server_tool_use
// object's members d count ("<tool>_requests", a number over 0 and at most
// math.MaxInt32), by the tool's name; nil when none.
func toolCalls(d map[string]json.RawMessage) map[string]int {
	var out map[string]int
	for k, v := range d {
		tool, ok := strings.CutSuffix(k, "_requests")
		var n float64
		if !ok || tool == "" || json.Unmarshal(v, &n) != nil || n <= 0 || n > math.MaxInt32 {
			continue
		}
		if out == nil {
			out = make(map[string]int, len(d))
		}
		out[tool] = int(n)
	}
	return out
}

// objectOf is the members of a JSON object, nil when raw is not one.
func objectOf(raw json.RawMessage) map[string]json.RawMessage {
	var d map[string]json.RawMessage
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return d
}

// detailCount reads a count of a details object: 0 when absent or not a
// number from 0 to math.MaxInt32 (a fraction is cut to whole tokens).
func detailCount(raw json.RawMessage) int {
	var n float64
	if json.Unmarshal(raw, &n) != nil || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int(n)
}

// EstimateTokens counts tokens the way the gateway does when an upstream
// reports none: about four bytes a token, at least one for any text.
func EstimateTokens(bytes int) int {
	if bytes <= 0 {
		return 0
	}
	return (bytes + 3) / 4
}
