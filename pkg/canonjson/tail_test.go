package canonjson

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

// benchRequest1MB is a coding agent's 1 MB body.
var benchRequest1MB = benchbody.Chat("m", 1<<20, `"max_tokens":128`)

// sequential is the form, or the error, of one goroutine alone.
func sequential(data []byte, path ...string) ([]byte, error) {
	return canonicalize(data, maxInput+1, path...)
}

// sameAsSequential fails unless two goroutines give what one gives: the
// same form, or the same error at the same offset. It reports whether the
// second goroutine's form was taken.
func sameAsSequential(t *testing.T, data []byte, path ...string) {
	t.Helper()
	want, wantErr := sequential(data, path...)
	got, err := canonicalize(data, 0, path...)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || !bytes.Equal(got, want) {
		t.Fatalf("two goroutines: %.200q, %v\none: %.200q, %v\ninput %.300q", got, err, want, wantErr, data)
	}
}

// tookTail reports whether the parse of data took the second goroutine's
// form.
func tookTail(data []byte) bool {
	p := parserPool.Get().(*parser)
	defer p.release()
	_, err := p.parse(data, 0)
	return err == nil && len(p.tails) == 1
}

// TestTailSameAsSequential: inputs where the guess is an element's start,
// and where it is not (inside a string, in an object), valid and not: the
// forms and errors are those of one goroutine.
func TestTailSameAsSequential(t *testing.T) {
	msgs := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString(`{"model":"m","messages":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(`{"role":"user","content":"line \n \"q\" é ` + strings.Repeat("x", i%7) + `","n":` + string(rune('0'+i%10)) + `.50}`)
		}
		b.WriteString(`]` + extra + `}`)
		return b.String()
	}
	cases := map[string]struct {
		in   string
		took bool
	}{
		"messages":                  {msgs(40, ""), true},
		"messages, more after":      {msgs(40, `,"b":[{"z":1},{"a":2}],"a":0`), true},
		"compact":                   {`[{"a":1},{"b":2},{"c":3},{"d":4}]`, true},
		"nested array":              {`{"x":[[{"a":1},{"a":2}],[{"b":3},{"b":4}]]}`, true},
		"guess in a string":         {`["aaaaaaaaaaaa},{bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 1]`, false},
		"guess in a member name":    {`{"q":{"a":1},"r":{"b":2}}`, false},
		"duplicate after guess":     {`[{"a":1},{"a":1,"a":2},{"b":1}]`, false},
		"bad escape after guess":    {`[{"a":"x"},{"a":"\q"},{"b":1}]`, false},
		"end cut after guess":       {`[{"a":1},{"a":2},{"b":`, false},
		"no closing bracket":        {`[{"a":1},{"a":2},{"b":1}`, false},
		"bad UTF-8 after guess":     {"[{\"a\":1},{\"a\":\"\xff\"},{\"b\":1}]", false},
		"trailing garbage":          {`[{"a":1},{"a":2}] x`, false},
		"float forms after guess":   {`[{"a":1},{"a":1.0e2,"b":-0},{"c":1e21}]`, true},
		"escapes to transcode":      {`[{"a":1},{"a":"\/\u00e9\ud83d\ude00"},{"b":1}]`, true},
		"whitespace between":        {"[ {\"a\":1} ,\n\t{\"a\":2} ,\r {\"b\":3} ]", true},
		"object inside the guess":   {`[{"a":{"b":{"c":[1,2,{"d":4}]}}},{"e":5},{"f":{"g":[]}}]`, true},
		"removed member, with tail": {`{"stream_options":{"include_usage":true},"m":[{"a":1},{"b":2},{"c":3}]}`, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := []byte(tc.in)
			sameAsSequential(t, data)
			sameAsSequential(t, data, "stream_options", "include_usage")
			if got := tookTail(data); got != tc.took {
				t.Errorf("took the tail: %v, want %v", got, tc.took)
			}
		})
	}
}

// TestTailDepth: the nesting limit counts the levels above the tail: a
// tail within the limit on its own but not with its array's depth is
// refused as one goroutine refuses it.
func TestTailDepth(t *testing.T) {
	for _, outer := range []int{1, MaxDepth - 4, MaxDepth - 3, MaxDepth - 2, MaxDepth} {
		in := strings.Repeat("[", outer) + `{"a":1},{"a":2},{"b":[[1]]}` + strings.Repeat("]", outer)
		sameAsSequential(t, []byte(in))
	}
}

// TestTailLargeBody: a coding agent's 1 MB body takes the tail, and its
// fingerprint's form is one goroutine's.
func TestTailLargeBody(t *testing.T) {
	sameAsSequential(t, benchRequest1MB)
	sameAsSequential(t, benchRequest1MB, "stream_options", "include_usage")
	if !tookTail(benchRequest1MB) {
		t.Error("the 1 MB body did not take the tail")
	}
	var w bytes.Buffer
	n := -1
	if err := WriteWithout(&w, func(m int) { n = m }, benchRequest1MB); err != nil || n != w.Len() {
		t.Fatalf("WriteWithout: %v, length %d of %d", err, n, w.Len())
	}
	want, _ := sequential(benchRequest1MB)
	if !bytes.Equal(w.Bytes(), want) {
		t.Error("WriteWithout with a tail wrote another form")
	}
}

// TestTailRandom: random values, rendered with random spacing, give one
// goroutine's form with a guessed tail.
func TestTailRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	took := 0
	for i := range 3000 {
		in := []byte(render(rng, genValue(rng, 0)))
		if i%2 == 0 {
			// An array of objects, as a conversation's messages are.
			var b strings.Builder
			b.WriteString("[")
			for j := range 2 + rng.IntN(6) {
				if j > 0 {
					b.WriteString(", "[:1+rng.IntN(2)])
				}
				b.WriteString(`{"k":` + render(rng, genValue(rng, 0)) + `,"j":` + string(rune('0'+j)) + `}`)
			}
			b.WriteString("]")
			in = []byte(b.String())
		}
		sameAsSequential(t, in)
		if tookTail(in) {
			took++
		}
		// Cut short, or with a byte changed: errors at the same offsets.
		if len(in) > 2 {
			sameAsSequential(t, in[:rng.IntN(len(in))])
			mut := bytes.Clone(in)
			mut[rng.IntN(len(mut))] = "{}[],:\"\\x1"[rng.IntN(10)]
			sameAsSequential(t, mut)
		}
	}
	if took < 100 {
		t.Errorf("%d of 3000 inputs took a tail: the test hardly checks it", took)
	}
}

// FuzzTail: whatever the input, two goroutines give what one gives.
func FuzzTail(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`[{"a":1},{"a":2},{"b":3}]`))
	f.Add([]byte(`{"m":[{"a":"},{"},{"b":[{"c":1},{"d":2}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsSequential(t, data)
		sameAsSequential(t, data, "a", "b")
	})
}
