package memstore

import (
	"encoding/binary"
	"errors"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

// A stored answer is kept packed: its status, headers, body and events in
// one byte slice. A slice of bytes holds no pointers, so the collector
// never scans it, however many answers the store holds; the same answer as
// an Answer (a header map, its strings, the body, an event slice) is a
// dozen objects to mark on every cycle. With thousands of answers stored,
// that marking makes keyed requests slower than unkeyed ones under
// load. Reads unpack into a fresh Answer, which the store had to
// copy out anyway.
//
// The layout, every length and count an unsigned varint:
//
//	flags (1 byte: 1 stream, 2 header map not nil, 4 body not nil)
//	status
//	headers: count, then name length, name, value length, value
//	body: length, bytes
//	events: count, then name length, name, usage (1 byte), data length, data

const (
	packStream = 1 << iota
	packHeader
	packBody
)

// packAnswer returns a packed as one byte slice.
func packAnswer(a *idempotency.Answer) []byte {
	// The exact size: the slice is kept as long as the answer is.
	n := 1 + uvarintLen(a.Status) + uvarintLen(len(a.Header)) + strLen(len(a.Body)) + uvarintLen(len(a.Events))
	for k, v := range a.Header {
		n += strLen(len(k)) + strLen(len(v))
	}
	for _, e := range a.Events {
		n += strLen(len(e.Name)) + 1 + strLen(len(e.Data))
	}
	b := make([]byte, 1, n)
	if a.Stream {
		b[0] |= packStream
	}
	if a.Header != nil {
		b[0] |= packHeader
	}
	if a.Body != nil {
		b[0] |= packBody
	}
	b = binary.AppendUvarint(b, uint64(a.Status))
	b = binary.AppendUvarint(b, uint64(len(a.Header)))
	for k, v := range a.Header {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	b = appendString(b, string(a.Body))
	b = binary.AppendUvarint(b, uint64(len(a.Events)))
	for _, e := range a.Events {
		b = appendString(b, e.Name)
		usage := byte(0)
		if e.Usage {
			usage = 1
		}
		b = append(b, usage)
		b = appendString(b, string(e.Data))
	}
	return b
}

// uvarintLen is the length of v as an unsigned varint; strLen that of a
// string of n bytes with its length before it.
func uvarintLen(v int) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func strLen(n int) int { return uvarintLen(n) + n }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errPacked = errors.New("memstore: a packed answer is corrupt")

// unpackAnswer returns the Answer packed in p. The body and the events'
// data are slices of one new copy of p, the header names and values and the
// event names substrings of one new string of it: the caller shares nothing
// with the store, in four allocations and the header map.
func unpackAnswer(p []byte) (*idempotency.Answer, error) {
	if len(p) == 0 {
		return nil, errPacked
	}
	u := unpacker{b: append([]byte(nil), p...), s: string(p)}
	flags := u.b[0]
	u.off = 1
	a := &idempotency.Answer{Stream: flags&packStream != 0}
	a.Status = int(u.uvarint())
	if nh := u.count(2); nh > 0 || flags&packHeader != 0 {
		a.Header = make(map[string]string, nh)
		for range nh {
			k := u.string()
			a.Header[k] = u.string()
		}
	}
	if body := u.bytes(); flags&packBody != 0 {
		a.Body = body
	}
	if ne := u.count(3); ne > 0 {
		a.Events = make([]idempotency.Event, ne)
		for i := range a.Events {
			name := u.string()
			usage := u.byte()
			a.Events[i] = idempotency.Event{Name: name, Usage: usage == 1, Data: u.bytes()}
		}
	}
	if u.err != nil || u.off != len(u.b) {
		return nil, errPacked
	}
	return a, nil
}

// unpacker reads a packed answer; the first fault sticks in err.
type unpacker struct {
	b   []byte
	s   string // the same bytes as b
	off int
	err error
}

func (u *unpacker) uvarint() uint64 {
	if u.err != nil {
		return 0
	}
	v, n := binary.Uvarint(u.b[u.off:])
	if n <= 0 {
		u.err = errPacked
		return 0
	}
	u.off += n
	return v
}

// count reads a count of items each at least min bytes long, refusing one
// the rest of the buffer cannot hold.
func (u *unpacker) count(min int) int {
	v := u.uvarint()
	if v > uint64((len(u.b)-u.off)/min) {
		u.err = errPacked
		return 0
	}
	return int(v)
}

func (u *unpacker) byte() byte {
	if u.err != nil || u.off >= len(u.b) {
		u.err = errPacked
		return 0
	}
	u.off++
	return u.b[u.off-1]
}

// bytes reads a length and that many bytes, as a slice of u.b whose
// capacity ends with it (an append by the caller copies).
func (u *unpacker) bytes() []byte {
	v := u.uvarint()
	if u.err != nil || v > uint64(len(u.b)-u.off) {
		u.err = errPacked
		return nil
	}
	s := u.b[u.off : u.off+int(v) : u.off+int(v)]
	u.off += int(v)
	return s
}

// string reads a length and that many bytes, as a substring of u.s.
func (u *unpacker) string() string {
	b := u.bytes() // ends at u.off
	return u.s[u.off-len(b) : u.off]
}
