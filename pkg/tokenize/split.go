package tokenize

import (
	"unicode"
	"unicode/utf8"
)

// The split patterns of the two encodings, as their vocabulary files give
// them. A text is split into pieces by the pattern before byte-pair
// merging; a backtracking engine (regexp2) reads about 5 MB a second, so
// for these two the split is done by hand (splitter), the same pieces
// (FuzzSplit compares them with regexp2's).
const (
	patCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patO200K  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitter finds the pieces of a valid UTF-8 text by one of the two
// patterns, as a backtracking engine does: at each position the first
// alternative that matches, each quantifier taking as much as lets the
// rest match.
type splitter struct {
	o200k bool // patO200K, else patCL100K
}

// splitterFor is the splitter of pattern, if it is one of the two.
func splitterFor(pattern string) (splitter, bool) {
	switch pattern {
	case patO200K:
		return splitter{o200k: true}, true
	case patCL100K:
		return splitter{}, true
	}
	return splitter{}, false
}

// Classes of a character, as the patterns name them.
const (
	cL     = 1 << iota // \p{L}
	cN                 // \p{N}
	cSpace             // \s
	cNL                // \r or \n
	cUpper             // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower             // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classOf(r)
	}
	return t
}()

func classOf(r rune) uint8 {
	var c uint8
	switch {
	case unicode.Is(unicode.Lo, r), unicode.Is(unicode.Lm, r):
		c = cL | cUpper | cLower
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		c = cL | cUpper
	case unicode.Is(unicode.Ll, r):
		c = cL | cLower
	case unicode.Is(unicode.M, r):
		c = cUpper | cLower
	case unicode.Is(unicode.N, r):
		c = cN
	}
	if unicode.IsSpace(r) {
		c |= cSpace
	}
	if r == '\r' || r == '\n' {
		c |= cNL
	}
	return c
}

// at is the character of t at byte i, its size and its classes; size 0 at
// the end.
func at(t string, i int) (r rune, size int, class uint8) {
	if i >= len(t) {
		return -1, 0, 0
	}
	if c := t[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, size = utf8.DecodeRuneInString(t[i:])
	return r, size, classOf(r)
}

// pre is [^\r\n\p{L}\p{N}], punct [^\s\p{L}\p{N}].
func pre(c uint8) bool   { return c&(cNL|cL|cN) == 0 }
func punct(c uint8) bool { return c&(cSpace|cL|cN) == 0 }

// run is where the run of characters of t from i with a class in want
// ends.
func run(t string, i int, want uint8) int {
	for {
		_, n, c := at(t, i)
		if n == 0 || c&want == 0 {
			return i
		}
		i += n
	}
}

// contraction is the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or 0.
func contraction(t string, i int) int {
	if i >= len(t) || t[i] != '\'' {
		return 0
	}
	r, n, _ := at(t, i+1)
	if n == 0 {
		return 0
	}
	switch unicode.ToLower(r) {
	case 's', 't', 'm', 'd':
		return 1 + n
	case 'r', 'v':
		if r2, n2, _ := at(t, i+1+n); n2 > 0 && unicode.ToLower(r2) == 'e' {
			return 1 + n + n2
		}
	case 'l':
		if r2, n2, _ := at(t, i+1+n); n2 > 0 && unicode.ToLower(r2) == 'l' {
			return 1 + n + n2
		}
	}
	return 0
}

// next is where the piece starting at i ends, or -1 when none starts
// there (the engine then moves on a character).
func (s splitter) next(t string, i int) int {
	r, n, c := at(t, i)
	if s.o200k {
		// P?U*W+C? then P?U+W*C?, each with the optional character taken
		// first.
		for _, alt := range [2]bool{false, true} {
			if pre(c) {
				if e := o200kWord(t, i+n, alt); e >= 0 {
					return e
				}
			}
			if e := o200kWord(t, i, alt); e >= 0 {
				return e
			}
		}
	} else {
		if k := contraction(t, i); k > 0 {
			return i + k
		}
		if pre(c) {
			if _, n2, c2 := at(t, i+n); c2&cL != 0 {
				return run(t, i+n+n2, cL)
			}
		}
		if c&cL != 0 {
			return run(t, i+n, cL)
		}
	}
	if c&cN != 0 { // \p{N}{1,3}
		e := i + n
		for range 2 {
			_, n2, c2 := at(t, e)
			if c2&cN == 0 {
				break
			}
			e += n2
		}
		return e
	}
	// ' '?[^\s\p{L}\p{N}]+ then [\r\n]* (cl100k) or [\r\n/]* (o200k).
	start := -1
	if _, n2, c2 := at(t, i+n); r == ' ' && n2 > 0 && punct(c2) {
		start = i + n
	} else if punct(c) {
		start = i
	}
	if start >= 0 {
		e := punctRun(t, start)
		for {
			r2, n2, _ := at(t, e)
			if n2 == 0 || !(r2 == '\r' || r2 == '\n' || s.o200k && r2 == '/') {
				return e
			}
			e += n2
		}
	}
	if c&cSpace == 0 {
		return -1
	}
	w := run(t, i, cSpace) // the whitespace from i
	// \s*[\r\n]+: the whitespace up to its last \r or \n.
	lastNL := -1
	for j := i; j < w; {
		_, n2, c2 := at(t, j)
		if c2&cNL != 0 {
			lastNL = j + n2
		}
		j += n2
	}
	if lastNL >= 0 {
		return lastNL
	}
	// \s+(?!\S): all of it at the end of the text, else all but its last
	// character; then \s+.
	if w == len(t) {
		return w
	}
	_, last := utf8.DecodeLastRuneInString(t[i:w])
	if w-last > i {
		return w - last
	}
	return w
}

// punctRun is where the run of [^\s\p{L}\p{N}] from i ends.
func punctRun(t string, i int) int {
	for {
		_, n, c := at(t, i)
		if n == 0 || !punct(c) {
			return i
		}
		i += n
	}
}

// o200kWord matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// (or, upperFirst, [...]+[...]*) then the optional contraction at i: its
// end, or -1.
func o200kWord(t string, i int, upperFirst bool) int {
	u := run(t, i, cUpper) // U* as far as it goes
	if upperFirst {
		if u == i {
			return -1
		}
		e := run(t, u, cLower)
		return e + contraction(t, e)
	}
	// Give back upper characters until one that is lower too starts W+.
	for k := u; ; {
		if _, n, c := at(t, k); n > 0 && c&cLower != 0 {
			e := run(t, k, cLower)
			return e + contraction(t, e)
		}
		if k == i {
			return -1
		}
		_, size := utf8.DecodeLastRuneInString(t[i:k])
		k -= size
	}
}
