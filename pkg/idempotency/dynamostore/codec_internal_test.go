package dynamostore

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/idempotency"
)

func TestBlobRoundTrip(t *testing.T) {
	head := &idempotency.Head{Status: 201, Header: map[string]string{"Content-Type": "application/json", "X-Empty": "", "Ä": "\x00\xff"}}
	for name, b := range map[string]blob{
		"answer":             {head: head, body: []byte(`{"a":1}`)},
		"nil everything":     {head: &idempotency.Head{}},
		"empty everything":   {head: &idempotency.Head{Header: map[string]string{}}, body: []byte{}, events: []idempotency.Event{}},
		"stream":             {stream: true, head: head, events: []idempotency.Event{{Data: []byte("x")}, {Data: nil}, {Data: []byte{}}, {Data: []byte("u"), Usage: true}}},
		"batch without head": {events: []idempotency.Event{{Data: []byte("[DONE]")}}},
		"named events": {stream: true, head: head, events: []idempotency.Event{{Name: "message_start", Data: []byte(`{"type":"message_start"}`)},
			{Name: "ping", Data: []byte{}}, {Name: "message_delta", Data: []byte("u"), Usage: true}, {Data: []byte("unnamed")}}},
		"negative status": {head: &idempotency.Head{Status: -1}},
		"all bytes": {head: head, body: func() []byte {
			p := make([]byte, 512)
			for i := range p {
				p[i] = byte(i)
			}
			return p
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := unpackBlob(packBlob(b))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, b) { // DeepEqual tells nil from empty
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, b)
			}
		})
	}
}

func TestBlobCorrupt(t *testing.T) {
	good := encodeBlob(blob{head: &idempotency.Head{Status: 200, Header: map[string]string{"A": "b"}}, body: []byte("body"), events: []idempotency.Event{{Data: []byte("e")}}})
	for i := range len(good) {
		if _, err := decodeBlob(good[:i]); !errors.Is(err, errCorrupt) {
			t.Fatalf("truncated at %d: %v, want errCorrupt", i, err)
		}
	}
	if _, err := decodeBlob(append(bytes.Clone(good), 0)); !errors.Is(err, errCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := unpackBlob([]byte("not deflate at all")); !errors.Is(err, errCorrupt) {
		t.Fatalf("not deflate: %v", err)
	}
}

func FuzzDecodeBlob(f *testing.F) {
	f.Add(encodeBlob(blob{head: &idempotency.Head{Status: 200, Header: map[string]string{"A": "b"}}, body: []byte("x")}))
	f.Add(encodeBlob(blob{stream: true, events: []idempotency.Event{{Data: []byte("e"), Usage: true}}}))
	f.Add(encodeBlob(blob{stream: true, events: []idempotency.Event{{Name: "ping", Data: []byte("e")}}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := decodeBlob(p)
		if err != nil {
			return
		}
		// What decodes encodes back to the same blob.
		again, err := decodeBlob(encodeBlob(b))
		if err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("re-encoding changed the blob: %v", err)
		}
	})
}

func TestTimeFormat(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Unix(1764441000, 0), "1764441000000"},
		{time.Unix(1764441000, 123_000_000), "1764441000123"},
		{time.Unix(1764441000, 123_456_789), "1764441000123.456789"},
		{time.Unix(1764441000, 1), "1764441000000.000001"},
		{time.Unix(0, 0), "0"},
		{time.Unix(-1, 500_000_000), "-500"},
		{time.Unix(-1, 1), "-999.999999"},
		{time.Time{}, "-62135596800000"},
		{time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), "253402300799999.999999"},
	} {
		got := formatTime(c.t)
		if got != c.want {
			t.Errorf("formatTime(%s) = %s, want %s", c.t, got, c.want)
		}
		back, err := parseTime(got)
		if err != nil || !back.Equal(c.t) {
			t.Errorf("parseTime(%s) = %s, %v; want %s", got, back, err, c.t)
		}
		if c.t.IsZero() && !back.IsZero() {
			t.Errorf("the zero time came back as %s", back)
		}
	}
	for _, bad := range []string{"", "x", "1.0000001", "1e400"} {
		if _, err := parseTime(bad); err == nil {
			t.Errorf("parseTime(%q) succeeded", bad)
		}
	}
	if got := ttlFor(time.Unix(100, 0)); got != 100+3600 {
		t.Errorf("ttlFor(100s) = %d", got)
	}
	if got := ttlFor(time.Unix(100, 1)); got != 101+3600 {
		t.Errorf("ttlFor(100s+1ns) = %d", got)
	}
}

// The ALL_OLD path: a failed reserving put carries the record as it was
// (real DynamoDB). recordFromOldItem answers from it when it is the whole
// record, and sends the caller to Load otherwise. (The same path runs end to
// end in TestContractAllOld and TestCallCounts, through a proxy that adds
// the item to dynalite's answer.)
func TestRecordFromOldItem(t *testing.T) {
	now := time.Unix(1764441000, 0).UTC()
	ans := &idempotency.Answer{
		Head: idempotency.Head{Status: 200, Header: map[string]string{"Content-Type": "application/json"}},
		Body: []byte(`{"ok":true}`),
	}
	item := func(state idempotency.State, extra map[string]types.AttributeValue) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{
			AttrPK:          attrS("k"),
			AttrSK:          attrS(SKRecord),
			AttrState:       attrS(string(state)),
			AttrFingerprint: attrS("fp"),
			AttrOwner:       attrS("o1"),
			AttrRequestID:   attrS("req-1"),
			AttrLeaseUntil:  attrN(formatTime(now.Add(30 * time.Second))),
			AttrExpiresAt:   attrN(formatTime(now.Add(time.Hour))),
			AttrTTL:         attrN(strconv.FormatInt(ttlFor(now.Add(time.Hour)), 10)),
		}
		for k, v := range extra {
			it[k] = v
		}
		return it
	}
	want := func(state idempotency.State, a *idempotency.Answer) *idempotency.Record {
		return &idempotency.Record{
			Key: "k", Fingerprint: "fp", State: state, Owner: "o1", RequestID: "req-1",
			LeaseUntil: now.Add(30 * time.Second), ExpiresAt: now.Add(time.Hour), Answer: a,
		}
	}
	inline := map[string]types.AttributeValue{AttrAnswer: &types.AttributeValueMemberB{Value: packBlob(answerBlob(ans))}}

	for _, c := range []struct {
		name string
		item map[string]types.AttributeValue
		now  time.Time
		want *idempotency.Record // nil: not self-contained, Load
	}{
		{"completed inline", item(idempotency.StateCompleted, inline), now, want(idempotency.StateCompleted, ans)},
		{"completed, answer dropped", item(idempotency.StateCompleted, nil), now, want(idempotency.StateCompleted, nil)},
		{"tombstone", item(idempotency.StateTombstone, nil), now, want(idempotency.StateTombstone, nil)},
		{"at ExpiresAt: still live", item(idempotency.StateTombstone, nil), now.Add(time.Hour), want(idempotency.StateTombstone, nil)},
		{"in progress: its events are other items", item(idempotency.StateInProgress, nil), now, nil},
		{"completed in parts", item(idempotency.StateCompleted, map[string]types.AttributeValue{AttrParts: attrN("3")}), now, nil},
		{"over", item(idempotency.StateCompleted, inline), now.Add(time.Hour + time.Millisecond), nil},
		{"no item (dynalite)", nil, now, nil},
		{"corrupt answer", item(idempotency.StateCompleted, map[string]types.AttributeValue{AttrAnswer: &types.AttributeValueMemberB{Value: []byte("junk")}}), now, nil},
		{"unknown state", item("paused", nil), now, nil},
		{"no expires_at", func() map[string]types.AttributeValue {
			it := item(idempotency.StateTombstone, nil)
			delete(it, AttrExpiresAt)
			return it
		}(), now, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := recordFromOldItem(c.item, c.now)
			if c.want == nil {
				if ok {
					t.Fatalf("answered from the item (%+v), want a Load", got)
				}
				return
			}
			if !ok {
				t.Fatalf("sent to Load, want the record from the item")
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}
