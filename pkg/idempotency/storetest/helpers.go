package storetest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Window and Lease are the window and the lease of the records NewRecord
// makes.
const (
	Window = time.Hour
	Lease  = 30 * time.Second
)

// Base returns a base time for one test: the real clock truncated to whole
// seconds, in UTC. Every time the suite uses is Base plus or minus a few
// minutes or hours, so that a store may derive a TTL attribute from
// ExpiresAt, and truncating to seconds keeps every comparison exact whatever
// precision (at least one second) a store keeps.
func Base() time.Time {
	return time.Now().UTC().Truncate(time.Second)
}

// Key returns a fresh random record key (64 hex digits, like a SHA-256), so
// that suites that share one table never collide.
func Key() string { return randomHex(32) }

// Owner returns a fresh random owner token.
func Owner() string { return "owner-" + randomHex(16) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// NewRecord returns an in-progress record under key as the service reserves
// it at base: a fresh owner, a fingerprint, a request id, a tenant, LeaseUntil
// base+Lease and ExpiresAt base+Window.
func NewRecord(key string, base time.Time) *idempotency.Record {
	return &idempotency.Record{
		Key:         key,
		Fingerprint: "fp-" + randomHex(32),
		State:       idempotency.StateInProgress,
		Owner:       Owner(),
		LeaseUntil:  base.Add(Lease),
		ExpiresAt:   base.Add(Window),
		RequestID:   "req-" + randomHex(8),
		Tenant:      "project-" + randomHex(4),
	}
}

// RandomBytes returns n pseudo-random bytes drawn from seed: every byte
// value, and incompressible, so that a store that compresses must still
// split a large answer over several items.
func RandomBytes(n int, seed uint64) []byte {
	r := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// AllBytes returns the byte values 0 to 255 in order, repeated n times.
func AllBytes(n int) []byte {
	b := make([]byte, 0, 256*n)
	for range n {
		for v := range 256 {
			b = append(b, byte(v))
		}
	}
	return b
}

// StreamEvents returns n events of size pseudo-random bytes each (see
// RandomBytes), drawn from seed. None is marked Usage.
func StreamEvents(n, size int, seed uint64) []idempotency.Event {
	data := RandomBytes(n*size, seed)
	evs := make([]idempotency.Event, n)
	for i := range evs {
		evs[i] = idempotency.Event{Data: data[i*size : (i+1)*size : (i+1)*size]}
	}
	return evs
}

// JSONAnswer returns a 200 JSON answer with the replay headers and body.
func JSONAnswer(body []byte) *idempotency.Answer {
	return &idempotency.Answer{Head: *okHead("application/json", "openai", "0"), Body: body}
}

// StreamAnswer returns a 200 event-stream answer: events, then a usage
// chunk, then "[DONE]".
func StreamAnswer(events []idempotency.Event) *idempotency.Answer {
	evs := make([]idempotency.Event, 0, len(events)+2)
	evs = append(evs, events...)
	evs = append(evs,
		idempotency.Event{Data: []byte(`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`), Usage: true},
		idempotency.Event{Data: []byte("[DONE]")},
	)
	return &idempotency.Answer{
		Head:   *StreamHead(),
		Stream: true,
		Events: evs,
	}
}

// StreamHead returns the head of a 200 event-stream answer.
func StreamHead() *idempotency.Head {
	return okHead("text/event-stream", "anthropic", "1")
}

// okHead returns a 200 head with the headers a replay keeps: the content
// type, a fresh request id, the provider and the route depth.
func okHead(contentType, provider, depth string) *idempotency.Head {
	return &idempotency.Head{
		Status: 200,
		Header: map[string]string{
			"Content-Type":          contentType,
			"X-Request-Id":          "req-" + randomHex(8),
			"X-Gateway-Provider":    provider,
			"X-Gateway-Route-Depth": depth,
		},
	}
}

// TextEvents returns n small text events ("<prefix> 0", "<prefix> 1", ...).
func TextEvents(prefix string, n int) []idempotency.Event {
	evs := make([]idempotency.Event, n)
	for i := range evs {
		evs[i] = idempotency.Event{Data: fmt.Appendf(nil, `{"delta":"%s %d"}`, prefix, i)}
	}
	return evs
}

// Equal reports whether two times are equal at millisecond precision, the
// precision the suite asks of a store.
func Equal(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

var headOpts = cmp.Options{cmpopts.EquateEmpty()}

// DiffHead describes how got differs from want ("" when equal). A nil and
// an empty header map are equal.
func DiffHead(want, got *idempotency.Head) string {
	switch {
	case want == nil && got == nil:
		return ""
	case want == nil:
		return fmt.Sprintf("want no head, got %+v", *got)
	case got == nil:
		return fmt.Sprintf("want head %+v, got none", *want)
	}
	return cmp.Diff(*want, *got, headOpts)
}

// DiffEvents describes how got differs from want ("" when equal): the
// counts, and the first event that differs. Nil and empty data are equal.
func DiffEvents(want, got []idempotency.Event) string {
	var d []string
	if len(want) != len(got) {
		d = append(d, fmt.Sprintf("want %d events, got %d", len(want), len(got)))
	}
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.Name != g.Name || w.Usage != g.Usage || !bytes.Equal(w.Data, g.Data) {
			d = append(d, fmt.Sprintf("event %d: want {Name:%q Usage:%v Data:%s}, got {Name:%q Usage:%v Data:%s}",
				i, w.Name, w.Usage, preview(w.Data), g.Name, g.Usage, preview(g.Data)))
			break
		}
	}
	return strings.Join(d, "; ")
}

// DiffBytes describes how got differs from want ("" when equal): the
// lengths and the first offset that differs. Nil and empty are equal.
func DiffBytes(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return fmt.Sprintf("want %d bytes, got %d; first difference at offset %d (want %s, got %s)",
		len(want), len(got), i, preview(want[i:]), preview(got[i:]))
}

func preview(b []byte) string {
	const n = 24
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}

// DiffAnswer describes how got differs from want ("" when equal), briefly
// even for answers of several MiB.
func DiffAnswer(want, got *idempotency.Answer) string {
	switch {
	case want == nil && got == nil:
		return ""
	case want == nil:
		return fmt.Sprintf("want no answer, got one (status %d, %d bytes)", got.Status, got.Size())
	case got == nil:
		return fmt.Sprintf("want an answer (status %d, %d bytes), got none", want.Status, want.Size())
	}
	var d []string
	if s := DiffHead(&want.Head, &got.Head); s != "" {
		d = append(d, "head: "+s)
	}
	if want.Stream != got.Stream {
		d = append(d, fmt.Sprintf("Stream: want %v, got %v", want.Stream, got.Stream))
	}
	if s := DiffBytes(want.Body, got.Body); s != "" {
		d = append(d, "body: "+s)
	}
	if s := DiffEvents(want.Events, got.Events); s != "" {
		d = append(d, "events: "+s)
	}
	return strings.Join(d, "\n")
}

// DiffRecord describes how got differs from want ("" when equal): the
// identity (Key, Fingerprint, State, Owner, RequestID), LeaseUntil and
// ExpiresAt at millisecond precision, and the Answer. Head and Events are
// compared only when want is in progress: once a record is completed or
// tombstoned its Answer is what counts, and a store may keep or drop what
// was appended.
func DiffRecord(want, got *idempotency.Record) string {
	switch {
	case want == nil && got == nil:
		return ""
	case want == nil:
		return fmt.Sprintf("want no record, got %s", describe(got))
	case got == nil:
		return fmt.Sprintf("want %s, got no record", describe(want))
	}
	var d []string
	str := func(name, w, g string) {
		if w != g {
			d = append(d, fmt.Sprintf("%s: want %q, got %q", name, w, g))
		}
	}
	tm := func(name string, w, g time.Time) {
		if !Equal(w, g) {
			d = append(d, fmt.Sprintf("%s: want %s, got %s", name, w.Format(time.RFC3339Nano), g.Format(time.RFC3339Nano)))
		}
	}
	str("Key", want.Key, got.Key)
	str("Fingerprint", want.Fingerprint, got.Fingerprint)
	str("State", string(want.State), string(got.State))
	str("Owner", want.Owner, got.Owner)
	str("RequestID", want.RequestID, got.RequestID)
	str("Tenant", want.Tenant, got.Tenant)
	if want.Started != got.Started {
		d = append(d, fmt.Sprintf("Started: want %v, got %v", want.Started, got.Started))
	}
	tm("LeaseUntil", want.LeaseUntil, got.LeaseUntil)
	tm("ExpiresAt", want.ExpiresAt, got.ExpiresAt)
	if s := DiffAnswer(want.Answer, got.Answer); s != "" {
		d = append(d, "Answer: "+s)
	}
	if want.State == idempotency.StateInProgress {
		if s := DiffHead(want.Head, got.Head); s != "" {
			d = append(d, "Head: "+s)
		}
		if s := DiffEvents(want.Events, got.Events); s != "" {
			d = append(d, "Events: "+s)
		}
	}
	return strings.Join(d, "\n")
}

func describe(r *idempotency.Record) string {
	if r == nil {
		return "no record"
	}
	return fmt.Sprintf("record{Key:%s State:%s Owner:%s}", r.Key, r.State, r.Owner)
}

// Clone returns a deep copy of rec.
func Clone(rec *idempotency.Record) *idempotency.Record {
	if rec == nil {
		return nil
	}
	c := *rec
	c.Answer = CloneAnswer(rec.Answer)
	c.Head = cloneHead(rec.Head)
	c.Events = cloneEvents(rec.Events)
	return &c
}

// CloneAnswer returns a deep copy of a.
func CloneAnswer(a *idempotency.Answer) *idempotency.Answer {
	if a == nil {
		return nil
	}
	c := *a
	c.Header = cloneHeader(a.Header)
	c.Body = bytes.Clone(a.Body)
	c.Events = cloneEvents(a.Events)
	return &c
}

func cloneHead(h *idempotency.Head) *idempotency.Head {
	if h == nil {
		return nil
	}
	return &idempotency.Head{Status: h.Status, Header: cloneHeader(h.Header)}
}

func cloneHeader(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	c := make(map[string]string, len(h))
	for k, v := range h {
		c[k] = v
	}
	return c
}

func cloneEvents(evs []idempotency.Event) []idempotency.Event {
	if evs == nil {
		return nil
	}
	c := make([]idempotency.Event, len(evs))
	for i, e := range evs {
		c[i] = idempotency.Event{Name: e.Name, Data: bytes.Clone(e.Data), Usage: e.Usage}
	}
	return c
}
