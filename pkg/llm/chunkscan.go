package llm

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/buzzgate/buzzgate/internal/jsonscan"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// decodeChunk decodes a chat.completion.chunk into the zero c, as
// json.Unmarshal into a chat.UpstreamChunk and its typed form give it, without
// reflection for the chunks upstreams actually send; errv is the chunk's
// "error" member, raw. Every chunk of a stream is decoded (the router must
// see each one's output, finish reason and usage), and encoding/json was
// the largest part of the gateway's CPU per request.
//
// scanner.chunk is the fast path: it returns false whenever it cannot be
// sure that encoding/json would give exactly the same result (a key that
// matches a field only case-insensitively or through an escape, a key
// given twice, a value of an unexpected type, a number that is not a plain
// integer, very deep nesting, anything malformed), and then encoding/json
// decodes the chunk, errors included. FuzzDecodeDelta checks the two
// against each other. BenchmarkParseChunk keeps it: about half
// go-json-experiment's time.
func decodeChunk(raw []byte, h *chunkHead, like *chunkStrings) error {
	s := scanner{b: raw}
	if s.chunk(h, like) {
		return nil
	}
	var w chat.UpstreamChunk
	if err := json.Unmarshal(raw, &w); err != nil {
		*h = chunkHead{}
		return err
	}
	typed(&w, h)
	return nil
}

// chunkHead is what a chunk says, as decodeChunk decodes it (the fields of
// Chunk it sets, and the "error" member), kept apart from Chunk so that
// what the decoder's closures hold on the heap is no larger than that.
type chunkHead struct {
	ID, Model                      string
	Created                        int64
	SystemFingerprint, ServiceTier string
	Usage, Error                   json.RawMessage
	Choices                        []ChunkChoice
}

// chunk is the Chunk with h's fields and raw, but for its usage.
func (h *chunkHead) chunk(raw []byte) Chunk {
	return Chunk{Raw: raw, ID: h.ID, Model: h.Model, Created: h.Created, SystemFingerprint: h.SystemFingerprint,
		ServiceTier: h.ServiceTier, Choices: h.Choices}
}

// typed sets c's typed fields from w, as the fast path sets them.
func typed(w *chat.UpstreamChunk, c *chunkHead) {
	*c = chunkHead{ID: w.ID, Model: w.Model, Created: w.Created, SystemFingerprint: w.SystemFingerprint, ServiceTier: w.ServiceTier, Usage: w.Usage, Error: w.Error}
	if w.Choices == nil {
		return
	}
	c.Choices = make([]ChunkChoice, len(w.Choices))
	for i, ch := range w.Choices {
		d := ch.Delta
		t := ChunkChoice{Index: ch.Index, Logprobs: ch.Logprobs, Delta: Delta{
			Role: d.Role, Content: d.Content, Refusal: d.Refusal, FunctionCall: d.FunctionCall,
			ReasoningContent: stringOf(d.ReasoningContent), Reasoning: stringOf(d.Reasoning),
		}}
		if ch.FinishReason != nil {
			t.FinishReason = *ch.FinishReason
		}
		if len(ch.StopReason) > 0 && ch.StopReason[0] == '"' {
			seq := stringOf(ch.StopReason)
			t.StopSequence = &seq
		}
		if d.ToolCalls != nil {
			t.Delta.ToolCalls = make([]ToolCallDelta, len(d.ToolCalls))
			for j, tc := range d.ToolCalls {
				t.Delta.ToolCalls[j] = ToolCallDelta(tc)
			}
		}
		c.Choices[i] = t
	}
}

// stringOf is a raw JSON value's string, or "" when it is not one.
func stringOf(r json.RawMessage) string {
	var s string
	if len(r) > 0 && r[0] == '"' && json.Unmarshal(r, &s) == nil {
		return s
	}
	return ""
}

// maxScanDepth bounds the nesting the fast path follows; deeper goes to
// encoding/json, whose own limit is maxJSONDepth.
const (
	maxScanDepth = 512
	maxJSONDepth = 10000
)

type scanner struct {
	b []byte
	i int
	// quotesOnly: skipString finds where a string ends and checks nothing
	// else, for a body whose strings another parser checks in full.
	quotesOnly bool
	// split: messages checks a body of this many bytes or more on two
	// goroutines (msgtail.go); 0: never.
	split int
	// unique: an object with a member name given twice (after escapes are
	// decoded) fails the scan, with dup set to that name (uniqueObject).
	unique bool
	dup    *string
	// nest is the depth of the object uniqueObject is in (1: the
	// outermost); dupTop: dup is a member of the outermost object.
	nest   int
	dupTop bool
	// maxDepth is the deepest nesting of objects and arrays skip follows
	// (0: maxScanDepth).
	maxDepth int
	// noteObjects: every member name the scan reads is compared with
	// ObjectKeys, and objectKey set when one is among them or has an
	// escape (DecodeChatRequest).
	noteObjects, objectKey bool
}

func (s *scanner) ws() { s.i = jsonscan.SkipSpace(s.b, s.i) }

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// lit consumes a literal such as "null".
func (s *scanner) lit(l string) bool {
	if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// null consumes a null if one comes next.
func (s *scanner) null() bool {
	return s.peek() == 'n' && s.lit("null")
}

// object walks an object's members: for each it calls member with the key
// (raw: escapes are not decoded; esc reports whether it has any), positioned
// at the value, which member must consume. It returns false on a malformed
// object or when member does.
func (s *scanner) object(member func(key []byte, esc bool) bool) bool {
	if s.unique {
		return s.uniqueObject(member)
	}
	return s.anyObject(member)
}

// linearKeys is how many of an object's member names uniqueObject
// compares one by one; an object with more keeps the rest in a map.
const linearKeys = 16

// uniqueObject is object for a scanner that refuses a member name given
// twice in one object: parsers differ on which of the two counts (Go's
// encoding/json and Python's json take the last, others the first), so a
// request with one means one thing to the gateway and another to a
// provider. Names are compared as decoded ("a" and "\u0061" are one name);
// a name with an escape or bytes that are not UTF-8 is decoded as
// encoding/json does (invalid bytes become U+FFFD).
func (s *scanner) uniqueObject(member func(key []byte, esc bool) bool) bool {
	var first [linearKeys]string
	var rest map[string]struct{}
	n := 0
	s.nest++
	defer func() { s.nest-- }()
	return s.anyObject(func(key []byte, esc bool) bool {
		// The name is compared without a copy: it shares the body's
		// memory, which does not change during the scan.
		name := unsafe.String(unsafe.SliceData(key), len(key))
		if esc || !utf8.Valid(key) {
			// Declared here, so that only such a name costs an allocation.
			var decoded string
			start := keyStart(s.b, key)
			if json.Unmarshal(s.b[start:start+len(key)+2], &decoded) != nil {
				return false
			}
			name = decoded
		}
		seen := false
		for _, k := range first[:min(n, linearKeys)] {
			if k == name {
				seen = true
				break
			}
		}
		if !seen && rest != nil {
			_, seen = rest[name]
		}
		if seen {
			d := strings.Clone(name)
			s.dup, s.dupTop = &d, s.nest == 1
			return false
		}
		if n < linearKeys {
			first[n] = name
		} else {
			if rest == nil {
				rest = make(map[string]struct{}, linearKeys)
			}
			rest[name] = struct{}{}
		}
		n++
		return member(key, esc)
	})
}

// anyObject is object for any member names.
func (s *scanner) anyObject(member func(key []byte, esc bool) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		start := s.i + 1
		esc, ok := s.skipString()
		if !ok {
			return false
		}
		key := s.b[start : s.i-1]
		if s.noteObjects && !s.objectKey && (esc || isObjectKey(key)) {
			s.objectKey = true
		}
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key, esc) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array walks an array's elements, calling elem positioned at each.
func (s *scanner) array(elem func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		s.ws()
		if !elem() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// skipString consumes a string at s.i (which is '"'), checking it as JSON
// does; esc reports a backslash in it.
func (s *scanner) skipString() (esc, ok bool) {
	end, esc, ok := 0, false, false
	if s.quotesOnly {
		end, esc, ok = quoteEnd(s.b, s.i+1)
	} else {
		end, esc, ok = stringEnd(s.b, s.i+1)
	}
	if ok {
		s.i = end
	}
	return esc, ok
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// str decodes a string value; null leaves *dst as it is. Anything else is
// false.
func (s *scanner) str(dst *string) bool { return s.strLike(dst, "") }

// strLike is str, but a string equal to like is set to like itself instead
// of a new copy: the strings a stream repeats in every chunk are allocated
// once. The result is the same string either way.
func (s *scanner) strLike(dst *string, like string) bool {
	switch s.peek() {
	case 'n':
		return s.lit("null")
	case '"':
	default:
		return false
	}
	start := s.i
	esc, ok := s.skipString()
	if !ok {
		return false
	}
	body := s.b[start+1 : s.i-1]
	if !esc && utf8.Valid(body) {
		if string(body) == like {
			*dst = like
		} else {
			*dst = string(body)
		}
		return true
	}
	// Escapes or invalid UTF-8 (which encoding/json replaces): let it decode
	// this one string.
	return json.Unmarshal(s.b[start:s.i], dst) == nil
}

// strPtr decodes a *string: null sets nil.
func (s *scanner) strPtr(dst **string) bool {
	if s.null() {
		*dst = nil
		return true
	}
	v := new(string)
	if !s.str(v) {
		return false
	}
	*dst = v
	return true
}

// integer decodes a plain JSON integer (no fraction, no exponent) that fits
// in an int64; null leaves *dst as it is.
func (s *scanner) integer(dst *int64) bool {
	if s.null() {
		return true
	}
	start := s.i
	if !s.skipNumber() {
		return false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return false // a fraction, an exponent or too large: encoding/json decides
	}
	*dst = n
	return true
}

func (s *scanner) int(dst *int) bool {
	v := int64(*dst)
	if !s.integer(&v) || int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

// skipNumber consumes a number by JSON's grammar.
func (s *scanner) skipNumber() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	s.i = i
	return true
}

// skip consumes any value, checking it as JSON does; depth is the value's
// nesting (1: the outermost), and an object or an array nested deeper than
// the scanner's maxDepth fails.
func (s *scanner) skip(depth int) bool {
	limit := s.maxDepth
	if limit == 0 {
		limit = maxScanDepth
	}
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.skipString()
		return ok
	case c == '{':
		return depth <= limit && s.object(func([]byte, bool) bool { return s.skip(depth + 1) })
	case c == '[':
		return depth <= limit && s.array(func() bool { return s.skip(depth + 1) })
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.skipNumber()
	}
	return false
}

// raw consumes any value and returns its bytes, as a json.RawMessage field
// gets them, except that they are not copied: dst shares the input's
// memory (encoding/json copied). Every caller decodes a slice of its own
// (an SSE event's data is a new slice per event), which must then not be
// overwritten while what was decoded from it is in use.
func (s *scanner) raw(dst *json.RawMessage) bool {
	s.ws()
	start := s.i
	if !s.skip(1) {
		return false
	}
	*dst = s.b[start:s.i:s.i]
	return true
}

// fields tracks which known keys of one object were seen: a key given twice
// goes to encoding/json, whose rules for merging the two are subtle.
type fields uint32

// fields scans an object, handing field the index in names of each key
// (-1 for a key not in names): it gives up (so that encoding/json decides)
// on a key that matches a name only loosely (by case, or through an escape)
// and on a name given twice.
func (s *scanner) fields(names []string, field func(i int) bool) bool {
	var seen fields
	return s.object(func(key []byte, esc bool) bool {
		i, unsure := known(key, esc, names)
		if unsure || (i >= 0 && !seen.first(uint(i))) {
			return false
		}
		return field(i)
	})
}

func (f *fields) first(bit uint) bool {
	if *f&(1<<bit) != 0 {
		return false
	}
	*f |= 1 << bit
	return true
}

// known matches key against names exactly. A key with escapes, or one that
// equals a name only case-insensitively (encoding/json would take it for
// that field), is reported as unsure.
func known(key []byte, esc bool, names []string) (idx int, unsure bool) {
	if esc {
		return -1, true
	}
	for i, n := range names {
		if string(key) == n {
			return i, false
		}
	}
	for _, n := range names {
		if strings.EqualFold(string(key), n) {
			return -1, true
		}
	}
	return -1, false
}

var (
	deltaTop      = []string{"id", "model", "created", "system_fingerprint", "service_tier", "usage", "error", "choices"}
	deltaChoice   = []string{"index", "delta", "logprobs", "finish_reason", "stop_reason"}
	deltaDelta    = []string{"role", "content", "refusal", "tool_calls", "function_call", "reasoning_content", "reasoning"}
	deltaToolCall = []string{"index", "id", "type", "function"}
	deltaFunction = []string{"name", "arguments"}
	deltaLogprobs = []string{"content", "refusal"}
)

// chunkStrings are the top-level strings a stream repeats in its chunks.
type chunkStrings struct{ id, model, fingerprint, tier string }

// chunk decodes a whole chunk into the zero c; like (may be nil) holds
// strings an earlier chunk of the stream had, to share rather than copy
// again.
func (s *scanner) chunk(c *chunkHead, like *chunkStrings) bool {
	if like == nil {
		like = &chunkStrings{}
	}
	ok := s.fields(deltaTop, func(i int) bool {
		switch i {
		case 0:
			return s.strLike(&c.ID, like.id)
		case 1:
			return s.strLike(&c.Model, like.model)
		case 2:
			return s.integer(&c.Created)
		case 3:
			return s.strLike(&c.SystemFingerprint, like.fingerprint)
		case 4:
			return s.strLike(&c.ServiceTier, like.tier)
		case 5:
			return s.raw(&c.Usage)
		case 6:
			return s.raw(&c.Error)
		case 7:
			return list(s, &c.Choices, s.choice)
		}
		return s.skip(1)
	})
	if !ok {
		*c = chunkHead{}
		return false
	}
	s.ws()
	if s.i != len(s.b) {
		*c = chunkHead{}
		return false
	}
	return true
}

// list decodes an array into *dst, each element with elem; null leaves
// *dst as it is, as encoding/json does.
func list[T any](s *scanner, dst *[]T, elem func(*T) bool) bool {
	if s.null() {
		return true
	}
	if s.peek() != '[' {
		return false
	}
	*dst = make([]T, 0, 1)
	return s.array(func() bool {
		var zero T
		*dst = append(*dst, zero)
		return elem(&(*dst)[len(*dst)-1])
	})
}

// text decodes a string into *dst, and skips any other value (which reads
// as ""), as stringOf reads a raw value.
func (s *scanner) text(dst *string) bool {
	if s.peek() != '"' {
		*dst = ""
		return s.skip(3)
	}
	return s.str(dst)
}

func (s *scanner) choice(c *ChunkChoice) bool {
	return s.fields(deltaChoice, func(i int) bool {
		switch i {
		case 0:
			return s.int(&c.Index)
		case 1:
			if s.null() {
				return true
			}
			return s.deltaObject(&c.Delta)
		case 2:
			if s.null() {
				c.Logprobs = nil
				return true
			}
			c.Logprobs = new(chat.Logprobs)
			return s.logprobs(c.Logprobs)
		case 3:
			if s.null() {
				c.FinishReason = ""
				return true
			}
			return s.str(&c.FinishReason)
		case 4:
			if s.peek() != '"' {
				c.StopSequence = nil
				return s.skip(3)
			}
			c.StopSequence = new(string)
			return s.str(c.StopSequence)
		}
		return s.skip(2)
	})
}

func (s *scanner) deltaObject(d *Delta) bool {
	return s.fields(deltaDelta, func(i int) bool {
		switch i {
		case 0:
			return s.str(&d.Role)
		case 1:
			return s.strPtr(&d.Content)
		case 2:
			return s.strPtr(&d.Refusal)
		case 3:
			return list(s, &d.ToolCalls, s.toolCall)
		case 4:
			if s.null() {
				d.FunctionCall = nil
				return true
			}
			d.FunctionCall = new(chat.Function)
			return s.function(d.FunctionCall)
		case 5:
			return s.text(&d.ReasoningContent)
		case 6:
			return s.text(&d.Reasoning)
		}
		return s.skip(3)
	})
}

func (s *scanner) toolCall(t *ToolCallDelta) bool {
	return s.fields(deltaToolCall, func(i int) bool {
		switch i {
		case 0:
			return s.int(&t.Index)
		case 1:
			return s.str(&t.ID)
		case 2:
			return s.str(&t.Type)
		case 3:
			if s.null() {
				return true
			}
			return s.function(&t.Function)
		}
		return s.skip(4)
	})
}

func (s *scanner) function(f *chat.Function) bool {
	return s.fields(deltaFunction, func(i int) bool {
		switch i {
		case 0:
			return s.str(&f.Name)
		case 1:
			return s.str(&f.Arguments)
		}
		return s.skip(5)
	})
}

func (s *scanner) logprobs(l *chat.Logprobs) bool {
	return s.fields(deltaLogprobs, func(i int) bool {
		dst := &l.Content
		if i == 1 {
			dst = &l.Refusal
		}
		switch i {
		case 0, 1:
			if s.null() {
				*dst = nil
				return true
			}
			if s.peek() != '[' {
				return false
			}
			*dst = make([]json.RawMessage, 0, 4)
			return s.array(func() bool {
				var r json.RawMessage
				if !s.raw(&r) {
					return false
				}
				*dst = append(*dst, r)
				return true
			})
		}
		return s.skip(3)
	})
}

// remember keeps c's repeated strings for the next chunk (a chunk without
// one keeps the earlier).
func (c *chunkStrings) remember(ch *chunkHead) {
	keep := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	keep(&c.id, ch.ID)
	keep(&c.model, ch.Model)
	keep(&c.fingerprint, ch.SystemFingerprint)
	keep(&c.tier, ch.ServiceTier)
}
