package dynamostore

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

// A blob is what the store keeps of an answer or of an appended batch of
// events: a compact binary encoding, deflated (compress/flate).
//
//	version  byte (1)
//	flags    uvarint: flagStream, flagHead, flagHeaderNil, flagBodyNil, flagEventsNil
//	if flagHead: status varint, header count uvarint, then per header (sorted
//	            by name) name and value as uvarint length + bytes
//	body     uvarint length + bytes
//	events   uvarint count, then per event: flags byte (eventUsage,
//	         eventDataNil, eventNamed), if eventNamed the name as uvarint
//	         length + bytes, then the data as uvarint length + bytes
//
// nil and empty are kept apart (a nil Body, Events, Header or Data comes back
// nil), so that a replay is the answer as it was stored.
const blobVersion = 1

const (
	flagStream = 1 << iota
	flagHead
	flagHeaderNil
	flagBodyNil
	flagEventsNil
)

const (
	eventUsage = 1 << iota
	eventDataNil
	eventNamed
)

// blob is the decoded form: an Answer is a blob with a head; a batch of
// Append has a head in its first call only.
type blob struct {
	stream bool
	head   *idempotency.Head
	body   []byte
	events []idempotency.Event
}

func answerBlob(a *idempotency.Answer) blob {
	h := a.Head
	return blob{stream: a.Stream, head: &h, body: a.Body, events: a.Events}
}

func (b blob) answer() (*idempotency.Answer, error) {
	if b.head == nil {
		return nil, errors.New("answer without a head")
	}
	return &idempotency.Answer{Head: *b.head, Stream: b.stream, Body: b.body, Events: b.events}, nil
}

func encodeBlob(b blob) []byte {
	var flags uint64
	if b.stream {
		flags |= flagStream
	}
	if b.head != nil {
		flags |= flagHead
		if b.head.Header == nil {
			flags |= flagHeaderNil
		}
	}
	if b.body == nil {
		flags |= flagBodyNil
	}
	if b.events == nil {
		flags |= flagEventsNil
	}
	size := 16 + len(b.body) + 8*len(b.events)
	for _, e := range b.events {
		size += len(e.Name) + len(e.Data)
	}
	out := make([]byte, 0, size)
	out = append(out, blobVersion)
	out = binary.AppendUvarint(out, flags)
	if b.head != nil {
		out = binary.AppendVarint(out, int64(b.head.Status))
		names := make([]string, 0, len(b.head.Header))
		for k := range b.head.Header {
			names = append(names, k)
		}
		slices.Sort(names)
		out = binary.AppendUvarint(out, uint64(len(names)))
		for _, k := range names {
			out = appendBytes(out, []byte(k))
			out = appendBytes(out, []byte(b.head.Header[k]))
		}
	}
	out = appendBytes(out, b.body)
	out = binary.AppendUvarint(out, uint64(len(b.events)))
	for _, e := range b.events {
		var f byte
		if e.Usage {
			f |= eventUsage
		}
		if e.Data == nil {
			f |= eventDataNil
		}
		if e.Name != "" {
			f |= eventNamed
		}
		out = append(out, f)
		if e.Name != "" {
			out = appendBytes(out, []byte(e.Name))
		}
		out = appendBytes(out, e.Data)
	}
	return out
}

func appendBytes(out, p []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(p)))
	return append(out, p...)
}

var errCorrupt = errors.New("corrupt blob")

func decodeBlob(p []byte) (blob, error) {
	r := blobReader{p: p}
	if v := r.byte(); v != blobVersion {
		return blob{}, fmt.Errorf("%w: version %d", errCorrupt, v)
	}
	flags := r.uvarint()
	var b blob
	b.stream = flags&flagStream != 0
	if flags&flagHead != 0 {
		h := &idempotency.Head{Status: int(r.varint())}
		n := r.count()
		if flags&flagHeaderNil == 0 {
			h.Header = make(map[string]string, n)
		}
		for range n {
			k := string(r.bytes())
			v := string(r.bytes())
			if h.Header != nil {
				h.Header[k] = v
			}
		}
		b.head = h
	}
	b.body = r.bytes()
	if flags&flagBodyNil == 0 && b.body == nil {
		b.body = []byte{}
	}
	n := r.count()
	if flags&flagEventsNil == 0 {
		b.events = make([]idempotency.Event, 0, n)
	}
	for range n {
		f := r.byte()
		e := idempotency.Event{Usage: f&eventUsage != 0}
		if f&eventNamed != 0 {
			e.Name = string(r.bytes())
		}
		e.Data = r.bytes()
		if f&eventDataNil == 0 && e.Data == nil {
			e.Data = []byte{}
		}
		if b.events != nil {
			b.events = append(b.events, e)
		}
	}
	if r.err != nil {
		return blob{}, r.err
	}
	if len(r.p) != 0 {
		return blob{}, fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(r.p))
	}
	return b, nil
}

type blobReader struct {
	p   []byte
	err error
}

func (r *blobReader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated", errCorrupt)
	}
	r.p = nil
}

func (r *blobReader) byte() byte {
	if len(r.p) == 0 {
		r.fail()
		return 0
	}
	c := r.p[0]
	r.p = r.p[1:]
	return c
}

func (r *blobReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.p)
	return advance(r, v, n)
}

func (r *blobReader) varint() int64 {
	v, n := binary.Varint(r.p)
	return advance(r, v, n)
}

// advance consumes the n bytes a varint decoder read to get v, or fails
// on a varint that is truncated or overflows (n <= 0: the zero value).
func advance[T uint64 | int64](r *blobReader, v T, n int) T {
	if n <= 0 {
		r.fail()
		return 0
	}
	r.p = r.p[n:]
	return v
}

// count reads a length that cannot exceed what is left (each counted thing
// takes at least one byte), so that a corrupt count allocates nothing big.
func (r *blobReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.p)) {
		r.fail()
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed byte string: nil for length 0 (the caller
// tells nil from empty by a flag).
func (r *blobReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.p)) {
		r.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	b := bytes.Clone(r.p[:n])
	r.p = r.p[n:]
	return b
}

// Compression: deflate at the default level. Writers are pooled: a
// flate.Writer allocates about 600 KiB.
var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.DefaultCompression)
	return w
}}

func compress(p []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(p)/4 + 64)
	w := flateWriters.Get().(*flate.Writer)
	w.Reset(&buf)
	_, _ = w.Write(p) // a bytes.Buffer does not fail
	_ = w.Close()
	flateWriters.Put(w)
	return buf.Bytes()
}

func decompress(p []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(p))
	defer r.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: inflate: %v", errCorrupt, err)
	}
	return out, nil
}

func packBlob(b blob) []byte { return compress(encodeBlob(b)) }

func unpackBlob(p []byte) (blob, error) {
	raw, err := decompress(p)
	if err != nil {
		return blob{}, err
	}
	return decodeBlob(raw)
}

// Times are stored as N attributes in unix milliseconds, with the
// nanoseconds as a decimal fraction ("1764441000123.456789"), so that they
// compare as milliseconds in condition expressions and still come back
// exactly as they were given.
var (
	nsPerMs  = big.NewInt(1e6)
	nsPerSec = big.NewInt(1e9)
)

func formatTime(t time.Time) string {
	ns := new(big.Int).Mul(big.NewInt(t.Unix()), nsPerSec)
	ns.Add(ns, big.NewInt(int64(t.Nanosecond())))
	sign := ""
	if ns.Sign() < 0 {
		sign = "-"
		ns.Neg(ns)
	}
	ms, frac := new(big.Int).QuoRem(ns, nsPerMs, new(big.Int))
	s := sign + ms.String()
	if frac.Sign() != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", frac.Int64()), "0")
	}
	return s
}

func parseTime(s string) (time.Time, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return time.Time{}, fmt.Errorf("%w: time %q", errCorrupt, s)
	}
	r.Mul(r, new(big.Rat).SetInt(nsPerMs))
	if !r.IsInt() {
		return time.Time{}, fmt.Errorf("%w: time %q is finer than a nanosecond", errCorrupt, s)
	}
	sec, nsec := new(big.Int).DivMod(r.Num(), nsPerSec, new(big.Int))
	if !sec.IsInt64() {
		return time.Time{}, fmt.Errorf("%w: time %q out of range", errCorrupt, s)
	}
	return time.Unix(sec.Int64(), nsec.Int64()).UTC(), nil
}

// ttlFor is the TTL attribute for a record that expires at expiresAt: unix
// seconds, rounded up, plus an hour of slack (DynamoDB's TTL deletion is
// lazy and never decides expiry: expires_at does).
func ttlFor(expiresAt time.Time) int64 {
	s := expiresAt.Unix()
	if expiresAt.Nanosecond() > 0 {
		s++
	}
	return s + ttlSlack
}

const ttlSlack = 3600
