package tokenize

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// regexpPieces are the pieces of text by re, as regexp2 finds them.
func regexpPieces(t testing.TB, re *regexp2.Regexp, text string) []string {
	t.Helper()
	runes := []rune(text)
	var out []string
	m, err := re.FindRunesMatch(runes)
	for m != nil {
		out = append(out, string(runes[m.Index:m.Index+m.Length]))
		m, err = re.FindNextMatch(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// handPieces are the pieces of text by s.
func handPieces(s splitter, text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := s.next(text, i)
		if j < 0 {
			_, size := utf8.DecodeRuneInString(text[i:])
			i += size
			continue
		}
		out = append(out, text[i:j])
		i = j
	}
	return out
}

var splitPatterns = []struct {
	name    string
	pattern string
}{{O200K, patO200K}, {CL100K, patCL100K}}

// checkSplit fails unless the hand split of text is regexp2's, for both
// patterns.
func checkSplit(t *testing.T, text string) {
	t.Helper()
	text = string([]rune(text)) // as count makes it valid UTF-8
	for _, p := range splitPatterns {
		s, ok := splitterFor(p.pattern)
		if !ok {
			t.Fatalf("%s: no splitter", p.name)
		}
		want := regexpPieces(t, regexp2.MustCompile(p.pattern, regexp2.None), text)
		if got := handPieces(s, text); !slices.Equal(got, want) {
			t.Fatalf("%s %q:\nby hand %q\nregexp2 %q", p.name, text, got, want)
		}
	}
}

// splitAlphabet holds a character of every class the patterns tell apart,
// and the ones they name.
var splitAlphabet = []rune{
	'a', 'z', 'A', 'Z', 's', 'S', 't', 'T', 'r', 'R', 'e', 'E', 'v', 'V', 'm', 'M', 'l', 'L', 'd', 'D',
	'\'', '0', '9', ' ', '\t', '\n', '\r', '\v', '\f', '/', '!', '.', '-', '_',
	0x85, 0xA0, 0x2028, 0x3000, // other spaces
	'é', 'ß', 'Ω', 'ω', 0x01C5, 0x02B0, 0x3042, 0x4E00, 0x0301, 0x0903, 0x20DD, // Lt, Lm, Lo, marks
	0x0663, 0x00B2, 0x2163, 0xFF11, // other numbers
	0x017F, 0x212A, 0x0130, // letters that fold to ASCII ones
	0x1F680, 0xFFFD, 0x00A9, 0x2019,
}

// TestSplitMatchesRegexp: the hand split finds regexp2's pieces, on
// strings of the characters the patterns tell apart.
func TestSplitMatchesRegexp(t *testing.T) {
	for _, text := range []string{
		"", "hello world", "Hello, WORLD! 123456 'S 'll 'Re I'M",
		"  \n\n  \r\n\t x  ", "a\u0301 é\u0301", "日本語のテキストとemoji 🚀🔥",
		"HTTPServer JSONParser xmlHTTP", "!!!\n/\n/x", " !?/", "\u00a0\u00a0a",
		"ǅungla ʰa", "٣٤٥٦ ²³", "'", "' ", "x'", "'ſ 'K", strings.Repeat(" ", 10),
	} {
		checkSplit(t, text)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		rs := make([]rune, r.IntN(24))
		for i := range rs {
			rs[i] = splitAlphabet[r.IntN(len(splitAlphabet))]
		}
		checkSplit(t, string(rs))
	}
}

// FuzzSplit: on any text the hand split finds regexp2's pieces.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"Hello, WORLD! 123456 'S 'll", "  \n\n \r\n\t x ", "a\u0301 ǅʰ٣ 🚀", "\xff\xfe!/\n/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkSplit(t, text)
	})
}
