//go:build integration

package tokenize

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	tiktoken "github.com/pkoukk/tiktoken-go"
)

// encoders are the two encodings, each as the gateway counts with it (enc),
// merging every piece with the heap (heap), and as
// github.com/pkoukk/tiktoken-go counts (lib), loaded once for all tests.
type encoders struct {
	enc, heap *encoder
	lib       *tiktoken.Tiktoken
}

var (
	encsOnce sync.Once
	encsErr  error
	encs     map[string]encoders
)

func loadEncoders(t testing.TB) map[string]encoders {
	t.Helper()
	dir := vocabDir(t)
	encsOnce.Do(func() {
		encs = map[string]encoders{}
		for _, name := range []string{O200K, CL100K} {
			v, ranks, err := readVocab(filepath.Join(dir, name+".json"))
			if err != nil {
				encsErr = err
				return
			}
			enc, err := newEncoder(ranks, v.PatStr)
			if err != nil {
				encsErr = err
				return
			}
			heap := *enc
			heap.scan = 0
			core, err := tiktoken.NewCoreBPE(ranks, v.SpecialTokens, v.PatStr)
			if err != nil {
				encsErr = err
				return
			}
			special := map[string]any{}
			for k := range v.SpecialTokens {
				special[k] = true
			}
			lib := tiktoken.NewTiktoken(core, &tiktoken.Encoding{Name: name, PatStr: v.PatStr, MergeableRanks: ranks, SpecialTokens: v.SpecialTokens}, special)
			encs[name] = encoders{enc: enc, heap: &heap, lib: lib}
		}
	})
	if encsErr != nil {
		t.Fatal(encsErr)
	}
	return encs
}

// alphabets make texts of n bytes that are one piece of the split, or
// long runs of the same class: the worst case of byte-pair merging.
var alphabets = []struct {
	name string
	make func(r *rand.Rand, n int) string
}{
	{"letters", func(r *rand.Rand, n int) string { return randomFrom(r, n, "abcdefghijklmnopqrstuvwxyz") }},
	{"repeated", func(_ *rand.Rand, n int) string { return strings.Repeat("a", n) }},
	{"digits", func(r *rand.Rand, n int) string { return randomFrom(r, n, "0123456789") }},
	{"cjk", func(r *rand.Rand, n int) string { return randomRunes(r, n, 0x4E00, 0x9FFF) }},
	{"emoji", func(r *rand.Rand, n int) string { return randomRunes(r, n, 0x1F300, 0x1F64F) }},
	{"bytes", func(r *rand.Rand, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return string(b)
	}},
	{"symbols", func(r *rand.Rand, n int) string { return randomFrom(r, n, "!#$%&*+-=?@^_|~<>") }},
}

func randomFrom(r *rand.Rand, n int, set string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.IntN(len(set))]
	}
	return string(b)
}

func randomRunes(r *rand.Rand, n int, lo, hi rune) string {
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteRune(lo + rune(r.IntN(int(hi-lo+1))))
	}
	return sb.String()
}

// TestEncoderMatchesLibrary: the encoder counts what the library counts,
// for ordinary text and for long single pieces of every alphabet, by
// scanning and by the heap alike.
func TestEncoderMatchesLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	texts := append([]string{}, refTexts...)
	texts = append(texts, strings.Repeat("The gateway bills a dropped stream from a real token count. ", 50))
	for _, a := range alphabets {
		for _, n := range []int{2, 7, 63, 64, 65, 200, 3000} {
			texts = append(texts, a.make(r, n))
		}
	}
	for name, e := range loadEncoders(t) {
		for _, text := range texts {
			want := len(e.lib.EncodeOrdinary(text))
			if got := e.enc.count(text); got != want {
				t.Errorf("%s %.40q (%d bytes): %d tokens, the library %d", name, text, len(text), got, want)
			}
			if got := e.heap.count(text); got != want {
				t.Errorf("%s %.40q (%d bytes), by the heap: %d tokens, the library %d", name, text, len(text), got, want)
			}
		}
	}
}

// FuzzEncoder: on any short input both ways of merging count what the
// library counts.
func FuzzEncoder(f *testing.F) {
	for _, s := range refTexts {
		f.Add(s)
	}
	f.Add(strings.Repeat("ab", 40))
	f.Add("\xff\xfe🚀🚀🚀日本語日本語")
	encs := loadEncoders(f)
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 4096 {
			return // the library is quadratic
		}
		for name, e := range encs {
			want := len(e.lib.EncodeOrdinary(text))
			if got := e.enc.count(text); got != want {
				t.Errorf("%s %q: %d tokens, the library %d", name, text, got, want)
			}
			if got := e.heap.count(text); got != want {
				t.Errorf("%s %q, by the heap: %d tokens, the library %d", name, text, got, want)
			}
		}
	})
}

// TestCountOrdinaryExact: ordinary text, 160 KiB of the repository's
// documentation, is counted token by token: the library's count. About an
// eighth of its bytes are merged, within MergeLimit.
func TestCountOrdinaryExact(t *testing.T) {
	var docs strings.Builder
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	text := docs.String()[:160<<10] // about 20 KiB of it is merged
	text = strings.ToValidUTF8(text, "")
	c := New(vocabDir(t), nil)
	for name, e := range loadEncoders(t) {
		model := map[string]string{O200K: "gpt-4o", CL100K: "gpt-4"}[name]
		want := len(e.lib.EncodeOrdinary(text))
		if n, exact := c.Count(model, text); n != want || !exact {
			t.Errorf("%s, %d bytes of docs: %d tokens (exact %v), the library %d", name, len(text), n, exact, want)
		}
	}
}

// TestCountMergeLimit: of the pieces that are not tokens, MergeLimit bytes
// are merged and the rest counted at their rate: random letters in one
// piece, in words, or a blob of them before prose, are within 1% of their
// exact count.
func TestCountMergeLimit(t *testing.T) {
	c := New(vocabDir(t), nil)
	e := loadEncoders(t)[O200K].enc
	r := rand.New(rand.NewPCG(5, 6))
	oneWord := alphabets[0].make(r, 200<<10)
	var words strings.Builder
	for words.Len() < 200<<10 {
		words.WriteString(alphabets[0].make(r, 1+r.IntN(40)) + " ")
	}
	// Past the limit, only the pieces to merge are counted at the rate of
	// those merged: the prose after a blob is still counted token by token.
	blobThenProse := oneWord[:MergeLimit+8<<10] + " " + strings.Repeat("The gateway bills a dropped stream from a real token count. ", 2500)
	for name, text := range map[string]string{"one word": oneWord, "words": words.String(), "a blob, then prose": blobThenProse} {
		b := mergeBudget{left: MergeLimit}
		_, over := e.countBudget(text, &b)
		if b.left != 0 || b.bytes > MergeLimit || b.bytes < MergeLimit-64 || over == 0 {
			t.Errorf("%s: %d bytes merged, %d left to merge, %d bytes past them; want MergeLimit merged", name, b.bytes, b.left, over)
		}
		want := e.count(text)
		n, exact := c.Count("gpt-4o", text)
		if !exact || n < want*99/100 || n > want*101/100 {
			t.Errorf("%s: %d tokens (exact %v), exactly %d", name, n, exact, want)
		}
	}
	// A prompt's pieces share the limit.
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + oneWord[:100<<10] + `"},{"role":"user","content":"` + oneWord[100<<10:] + `"}]}`
	n, exact := c.Prompt("gpt-4o", []byte(body))
	want := e.count(oneWord[:100<<10]) + e.count(oneWord[100<<10:]) + 2*(PerMessage+1) + Priming
	if !exact || n < want*99/100 || n > want*101/100 {
		t.Errorf("prompt: %d tokens (exact %v), exactly %d", n, exact, want)
	}
}
