package llm

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"unsafe"

	"github.com/buzzgate/buzzgate/internal/jsonstr"
)

// Member is one top-level member of a JSON object, as written.
type Member struct {
	// Key is the decoded key; KeyRaw the key as written, quotes included.
	Key    string
	KeyRaw []byte
	// Value is the value as written.
	Value []byte
}

var errNotObject = errors.New("the body is not a JSON object")

// Members splits a JSON object into its top-level members, in order, with
// no copies: the members (their keys too) share body's memory, which must
// not change while they are in use. A key given twice is listed
// twice. It fails on anything that is not one well-formed object.
func Members(body []byte) ([]Member, error) {
	s := scanner{b: body}
	return members(&s)
}

func members(s *scanner) ([]Member, error) {
	ms := make([]Member, 0, 16)
	if !eachMember(s, func(m Member) bool { ms = append(ms, m); return true }) {
		return nil, errNotObject
	}
	return ms, nil
}

// EachMember calls f with each top-level member of a JSON object, in
// order, as Members lists them, allocating nothing but the key of a
// member whose key has an escape. BenchmarkEachMember keeps the scan and
// its keys without copies. It reports false, perhaps after some
// calls, when body is not one well-formed object or f returns false.
func EachMember(body []byte, f func(Member) bool) bool {
	s := scanner{b: body}
	return eachMember(&s, f)
}

func eachMember(s *scanner, f func(Member) bool) bool {
	body := s.b
	if s.peek() != '{' {
		return false
	}
	ok := s.object(func(key []byte, esc bool) bool {
		m := Member{KeyRaw: body[keyStart(body, key) : len(key)+keyStart(body, key)+2]}
		if esc {
			var k string // not &m.Key, which would allocate m for every member
			if json.Unmarshal(m.KeyRaw, &k) != nil {
				return false
			}
			m.Key = k
		} else {
			// The key shares body's memory, as the values do (Members
			// copies nothing): body must not change while ms is in use.
			m.Key = unsafe.String(unsafe.SliceData(key), len(key))
		}
		var v json.RawMessage
		if !s.raw(&v) {
			return false
		}
		m.Value = v
		return f(m)
	})
	if !ok {
		return false
	}
	s.ws()
	return s.i == len(body)
}

// RequestMembers is Members for a client's request body, which it also
// checks for an object, at any depth, with a member name given twice: that
// is a DuplicateMember error. Any other problem is Members's error (a body
// that is valid JSON the scan leaves aside, nested too deep, is checked by
// CheckUnique).
func RequestMembers(body []byte) ([]Member, error) {
	s := scanner{b: body, unique: true}
	ms, err := members(&s)
	if s.dup != nil {
		return nil, DuplicateMember(*s.dup, s.dupTop)
	}
	if err != nil {
		if uerr := CheckUnique(body); uerr != nil {
			return nil, uerr
		}
	}
	return ms, err
}

// keyStart is the offset in body of the opening quote of key, a sub-slice
// of body.
func keyStart(body, key []byte) int {
	return cap(body) - cap(key) - 1
}

// CaseVariant returns the first member whose key equals one of names but
// for case, or that repeats one of them: an upstream that reads keys
// case-insensitively (Go's encoding/json does) or keeps the last of two
// would read it in place of the gateway's own.
func CaseVariant(ms []Member, names ...string) (string, bool) {
	var seen uint64 // bit i: names[i] seen (names past 64 share bit 63)
	for _, m := range ms {
		for i, n := range names {
			if len(m.Key) != len(n) || !strings.EqualFold(m.Key, n) {
				continue
			}
			bit := uint64(1) << min(i, 63)
			if m.Key != n || seen&bit != 0 {
				return m.Key, true
			}
			seen |= bit
		}
	}
	return "", false
}

// SetTopLevel returns body with the top-level members named in set given
// those values (raw JSON; nil removes the member), in place of the first
// member of that name and after the others for a name the body lacks.
// Every other byte of the members is copied as written.
func SetTopLevel(body []byte, set map[string][]byte) ([]byte, error) {
	ms, err := Members(body)
	if err != nil {
		return nil, err
	}
	return Splice(ms, len(body), set), nil
}

// Splice is SetTopLevel over members already split; size is a hint of the
// result's length.
func Splice(ms []Member, size int, set map[string][]byte) []byte {
	n := size + 2
	for k, v := range set {
		n += len(k) + len(v) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	first := true
	spliceMembers(ms, set, func(key, value []byte) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, key...)
		b = append(b, ':')
		b = append(b, value...)
	})
	return append(b, '}')
}

// SpliceParts is Splice without the copy: the result as pieces to write in
// order, in which every value of at least partMin bytes is the member's
// own memory (which must not change while the pieces are in use), and the
// rest is copied into a few small pieces between them.
func SpliceParts(ms []Member, set map[string][]byte) [][]byte {
	p := newPartsWriter(128)
	p.buf = append(p.buf, '{')
	first := true
	spliceMembers(ms, set, func(key, value []byte) {
		if !first {
			p.buf = append(p.buf, ',')
		}
		first = false
		p.buf = append(p.buf, key...)
		p.buf = append(p.buf, ':')
		p.value(value)
	})
	p.buf = append(p.buf, '}')
	return p.done()
}

// partMin is the size from which a value becomes a piece of its own rather
// than being copied: below it, a copy costs less than a write of its own.
const partMin = 4 << 10

// partsWriter collects pieces: small bytes in buf, large values as they are.
type partsWriter struct {
	parts [][]byte
	buf   []byte
	start int // buf[start:] is not yet in parts
}

func newPartsWriter(size int) *partsWriter {
	return &partsWriter{parts: make([][]byte, 0, 8), buf: make([]byte, 0, size)}
}

// value writes v: copied when small, a piece of its own when large.
func (p *partsWriter) value(v []byte) {
	if len(v) < partMin {
		p.buf = append(p.buf, v...)
		return
	}
	p.flush()
	p.parts = append(p.parts, v)
}

// flush makes what buf holds past start a piece. Later appends to buf
// write past the piece's end, or into a new array, never into it.
func (p *partsWriter) flush() {
	if len(p.buf) > p.start {
		p.parts = append(p.parts, p.buf[p.start:len(p.buf):len(p.buf)])
		p.start = len(p.buf)
	}
}

func (p *partsWriter) done() [][]byte {
	p.flush()
	return p.parts
}

// spliceMembers calls member for each member of the result of splicing set
// into ms, in order: ms's members as written (a set one with its new value,
// a removed or repeated one left out), then the names set adds, sorted.
func spliceMembers(ms []Member, set map[string][]byte, member func(key, value []byte)) {
	done := make(map[string]bool, len(set))
	for _, m := range ms {
		v, ok := set[m.Key]
		if !ok {
			member(m.KeyRaw, m.Value)
			continue
		}
		if done[m.Key] || v == nil {
			done[m.Key] = true
			continue
		}
		done[m.Key] = true
		member(m.KeyRaw, v)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if v := set[k]; !done[k] && v != nil {
			member(jsonstr.Append(nil, k, true), v)
		}
	}
}

// AppendString appends s as a JSON string.
func AppendString(b []byte, s string) []byte { return jsonstr.Append(b, s, true) }

// Field is a top-level member of the request's body as the client sent it
// (the last of a key given twice), and whether it is there.
func (r *ChatRequest) Field(name string) (json.RawMessage, bool) {
	v, ok := r.fields[name]
	return v, ok
}

// CaseVariant is the package's CaseVariant for a decoded request: a
// top-level field that differs from one of names only in case (a key given
// twice is one field here, the last, as the decoder and the upstream body
// keep it). Several are reported in key order, the first.
func (r *ChatRequest) CaseVariant(names ...string) (string, bool) {
	var found string
	for k := range r.fields {
		for _, n := range names {
			if k != n && len(k) == len(n) && strings.EqualFold(k, n) && (found == "" || k < found) {
				found = k
			}
		}
	}
	return found, found != ""
}
