package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

// sameSplit fails unless checking the messages on two goroutines gives
// what one gives.
func sameSplit(t *testing.T, body []byte) {
	t.Helper()
	f1, ok1, okAll1 := splitChatFrom(body, false, 0)
	f2, ok2, okAll2 := splitChatFrom(body, false, 1)
	if ok1 != ok2 || okAll1 != okAll2 || !reflect.DeepEqual(f1, f2) {
		t.Fatalf("two goroutines: messages %v, split %v; one: %v, %v\nbody %.300q", ok2, okAll2, ok1, okAll1, body)
	}
}

// TestMessagesTailLargeBody: on a coding agent's 1 MB body the second
// goroutine starts at a message past the middle and checks the rest of
// the messages array, to its closing bracket.
func TestMessagesTailLargeBody(t *testing.T) {
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128`)
	at := messageAt(body, len(body)/2)
	if at < 0 || !bytes.HasPrefix(body[at:], []byte(`{"role"`)) {
		t.Fatalf("guess at %d: %.20q", at, body[max(at, 0):])
	}
	fields, msgsOK, ok := splitChatFrom(body, false, 0)
	if !ok || !msgsOK {
		t.Fatal("the body does not pass")
	}
	raw := fields["messages"]
	start := bytes.Index(body, raw)
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatal(err)
	}
	after := 0
	for _, m := range msgs {
		if i := bytes.Index(body[start:], m); start+i >= at {
			after++
		}
	}
	tl := &msgTail{at: at, done: make(chan struct{})}
	go tl.run(scanner{b: body, i: at})
	n, end, tailOK := tl.result()
	if !tailOK || end != start+len(raw)-1 || n != after {
		t.Errorf("tail: ok %v, %d messages to %d; want %d messages to %d", tailOK, n, end, after, start+len(raw)-1)
	}
	sameSplit(t, body)
}

// TestMessagesTailSameAsOne: bodies whose guessed message is one, and
// bodies where it is not, or where what follows it does not pass: the
// verdict and the split are one goroutine's.
func TestMessagesTailSameAsOne(t *testing.T) {
	msg := func(i int) string {
		return fmt.Sprintf(`{"role":"user","content":"text %d \n \"q\" é"}`, i)
	}
	conv := func(n int, bad map[int]string) string {
		var parts []string
		for i := range n {
			if b, ok := bad[i]; ok {
				parts = append(parts, b)
				continue
			}
			parts = append(parts, msg(i))
		}
		return `{"model":"m","messages":[` + strings.Join(parts, ", ") + `],"tools":[{"role":"x"},{"role":"y"}]}`
	}
	for name, body := range map[string]string{
		"all pass":               conv(30, nil),
		"no role late":           conv(30, map[int]string{25: `{"content":"x"}`}),
		"empty role late":        conv(30, map[int]string{25: `{"role":"","content":"x"}`}),
		"role not a string late": conv(30, map[int]string{25: `{"role":1}`}),
		"Role late":              conv(30, map[int]string{25: `{"Role":"user"}`}),
		"bad escape late":        conv(30, map[int]string{25: `{"role":"user","content":"\q"}`}),
		"not an object late":     conv(30, map[int]string{25: `"x"`}),
		"no role early":          conv(30, map[int]string{2: `{"content":"x"}`}),
		"role twice late":        conv(30, map[int]string{25: `{"role":"user","role":"assistant"}`}),
		"cut":                    conv(30, nil)[:900],
		"messages last":          `{"model":"m","tools":[{"a":1},{"role":"q"},{"role":"r"}],"messages":[` + msg(0) + `,` + msg(1) + `]}`,
	} {
		t.Run(name, func(t *testing.T) { sameSplit(t, []byte(body)) })
	}
}

// TestMessagesTailRandom: conversations with a bad message here and
// there, spaced at random: the verdict and the split are one goroutine's.
func TestMessagesTailRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	bad := []string{`{"content":"x"}`, `{"role":""}`, `{"role":null}`, `{"role":"u","role":"v"}`, `{"ROLE":"u"}`, `[]`, `{"role":"u","x":[1,}`}
	for range 2000 {
		var b strings.Builder
		b.WriteString(`{"model":"m","messages":[`)
		n := 1 + rng.IntN(12)
		for i := range n {
			if i > 0 {
				b.WriteString(", "[:1+rng.IntN(2)])
			}
			if rng.IntN(20) == 0 {
				b.WriteString(bad[rng.IntN(len(bad))])
			} else {
				fmt.Fprintf(&b, `{"role":"user","content":"%s","n":%d}`, strings.Repeat("w \\n ", rng.IntN(8)), i)
			}
		}
		b.WriteString(`]}`)
		sameSplit(t, []byte(b.String()))
	}
}

// FuzzMessagesTail: whatever the body, two goroutines give what one gives.
func FuzzMessagesTail(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"messages":[{"role":"a"},{"role":"b"},{"role":"c"}]}`))
	f.Add([]byte(`{"messages":[{"role":"a"},{"x":"},{\"role\":1}"},{"role":"c"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) { sameSplit(t, body) })
}
