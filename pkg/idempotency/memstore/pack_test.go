package memstore

import (
	"reflect"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

func packCases() []*idempotency.Answer {
	return []*idempotency.Answer{
		{},
		{Head: idempotency.Head{Status: 200, Header: map[string]string{}}, Body: []byte{}},
		{Head: idempotency.Head{Status: 200, Header: map[string]string{
			"Content-Type": "application/json", "X-Request-Id": "req_1", "X-Gateway-Provider": "openai",
		}}, Body: []byte(`{"id":"chatcmpl-1","choices":[]}`)},
		{Head: idempotency.Head{Status: 599}, Body: []byte("\x00\xff not utf-8")},
		{Head: idempotency.Head{Status: 200, Header: map[string]string{"Content-Type": "text/event-stream"}}, Stream: true,
			Events: []idempotency.Event{
				{Data: []byte(`{"choices":[{"delta":{"content":"hi"}}]}`)},
				{Name: "message_delta", Data: []byte{}},
				{Data: []byte(`{"usage":{}}`), Usage: true},
				{Data: []byte("[DONE]")},
			}},
	}
}

func TestPackRoundTrip(t *testing.T) {
	for i, a := range packCases() {
		p := packAnswer(a)
		got, err := unpackAnswer(p)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("case %d: unpacked %+v, want %+v", i, got, a)
		}
		// The answer shares nothing with the packed bytes: changing it
		// leaves the next unpack as it was.
		if len(got.Body) > 0 {
			got.Body[0] ^= 1
		}
		for _, e := range got.Events {
			if len(e.Data) > 0 {
				e.Data[0] ^= 1
			}
		}
		again, err := unpackAnswer(p)
		if err != nil || !reflect.DeepEqual(again, a) {
			t.Fatalf("case %d: the packed answer changed with the unpacked one", i)
		}
		// A packed answer cut short, or with a byte more, is refused.
		for n := range len(p) {
			if _, err := unpackAnswer(p[:n]); err == nil {
				t.Fatalf("case %d: %d of %d bytes unpacked", i, n, len(p))
			}
		}
		if _, err := unpackAnswer(append(p[:len(p):len(p)], 0)); err == nil {
			t.Fatalf("case %d: a trailing byte was accepted", i)
		}
	}
}

// An event's data appended to by the caller does not run into the next
// event's bytes.
func TestUnpackedSlicesAreCapped(t *testing.T) {
	a := packCases()[4]
	got, err := unpackAnswer(packAnswer(a))
	if err != nil {
		t.Fatal(err)
	}
	_ = append(got.Events[0].Data, 'X')
	if !reflect.DeepEqual(got.Events[1:], a.Events[1:]) {
		t.Fatalf("an append to one event's data changed the next: %+v", got.Events[1:])
	}
}

// FuzzUnpack: any bytes unpack without a panic, and what unpacks packs back
// to an answer equal to it.
func FuzzUnpack(f *testing.F) {
	for _, a := range packCases() {
		f.Add(packAnswer(a))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		a, err := unpackAnswer(p)
		if err != nil {
			return
		}
		b, err := unpackAnswer(packAnswer(a))
		if err != nil {
			t.Fatalf("repacked answer does not unpack: %v", err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("repacked %+v, want %+v", b, a)
		}
	})
}

// FuzzPack: answers built from arbitrary parts come back equal.
func FuzzPack(f *testing.F) {
	f.Add(200, "Content-Type", "application/json", []byte(`{"a":1}`), false, "", []byte("x"), true, uint8(7))
	f.Add(0, "", "", []byte(nil), true, "message_start", []byte(nil), false, uint8(0))
	f.Fuzz(func(t *testing.T, status int, k, v string, body []byte, stream bool, name string, data []byte, usage bool, shape uint8) {
		if status < 0 {
			status = -status
		}
		a := &idempotency.Answer{Head: idempotency.Head{Status: status}, Stream: stream}
		if shape&1 != 0 {
			a.Header = map[string]string{k: v, k + "2": v + v}
		}
		if shape&2 != 0 || len(body) > 0 {
			a.Body = append([]byte{}, body...)
		}
		if shape&4 != 0 {
			d := append([]byte{}, data...)
			a.Events = []idempotency.Event{{Name: name, Data: d, Usage: usage}, {Data: []byte{}}}
		}
		got, err := unpackAnswer(packAnswer(a))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("unpacked %+v, want %+v", got, a)
		}
	})
}

// A packed answer is kept as long as its record: its capacity is its length.
func TestPackedAnswerHasNoSlack(t *testing.T) {
	big := &idempotency.Answer{Head: idempotency.Head{Status: 200}, Body: make([]byte, 300), Events: []idempotency.Event{{Data: make([]byte, 200)}}}
	for i, a := range append(packCases(), big) {
		if p := packAnswer(a); cap(p) != len(p) {
			t.Fatalf("case %d: %d bytes packed in a slice of %d", i, len(p), cap(p))
		}
	}
}
