package canonjson

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/internal/jsonscan"
)

// The fast path for string values, which are most of a large request's
// bytes: a value is checked eight bytes at a time, and kept where it is
// when its escapes, if any, are their own canonical form (\n, \", ...);
// one with another escape (\/, \u...) is copied into the arena already in
// canonical form, each escape turned into what appendString writes for the
// character it stands for. Either way the value's text is its canonical
// form (value.canon), which the writer copies as it is. Member names,
// which must be decoded to be sorted, go through str. It is hand-written
// for speed: BenchmarkJSONText and BenchmarkCanonicalize's 1 MB cases
// measure it against jsontext.

// strValue parses a string value at p.pos (the opening quote) into its
// canonical form (see above). Only the strings str accepts pass here; for
// any other (and, were there one, for a string the fast path does not
// take) str decodes it, or says what is wrong with it, at the same offset
// as for any string.
func (p *parser) strValue() (s span, canon bool, err error) {
	a := len(p.arena)
	if s, ok := p.scanString(p.pos + 1); ok {
		return s, true, nil
	}
	p.arena = p.arena[:a]
	s, err = p.str()
	return s, false, err
}

// scanString is strValue's fast path for the string whose contents start at
// data[i]: ok is false for any string str refuses.
func (p *parser) scanString(i int) (s span, ok bool) {
	b := p.data
	start := i
	var high uint64 // the OR of every word read: its high bits say non-ASCII
	next := i       // the first byte not yet consumed (escapes are skipped)
	// The first byte that is not ASCII, where the UTF-8 check starts (the
	// bytes before it are ASCII); past the end: none yet.
	firstHigh := len(b)
	for i < len(b) {
		x := jsonscan.Word(b, i)
		if h := x & jsonscan.Highs; h != 0 && high&jsonscan.Highs == 0 {
			firstHigh = i + bits.TrailingZeros64(h)>>3
		}
		high |= x
		for m := jsonscan.StopMask(x); m != 0; m &= m - 1 {
			j := i + bits.TrailingZeros64(m)>>3
			if j < next {
				continue
			}
			switch c := b[j]; {
			case c == '"':
				if firstHigh < j && !p.validUTF8 && !utf8.Valid(b[firstHigh:j]) {
					return span{}, false
				}
				p.pos = j + 1
				return span{start: int32(start), end: int32(j)}, true
			case c == '\\':
				// An escape written as it is lets the string stay
				// where it is.
				if j+1 < len(b) && canonShort[b[j+1]] {
					next = j + 2
					continue
				}
				if n := canonEscapeLen(b, j); n > 0 {
					next = j + n
					continue
				}
				return p.scanEscaped(start, j, high)
			case c < 0x20:
				return span{}, false
			}
		}
		i = max(i+8, next)
	}
	return span{}, false
}

// canonShort marks the characters of the two-byte escapes that are their
// own canonical form.
var canonShort = [256]bool{'"': true, '\\': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// canonEscapeLen is the length of the escape at b[i] (a backslash) when it
// is its own canonical form (what appendString writes for the character),
// else 0: \", \\, \b, \f, \n, \r, \t, and \u00xx in lowercase for another
// control character. JSON.stringify, encoding/json without HTML escaping
// and most encoders write no other escape, so most strings with escapes
// stay in the input.
func canonEscapeLen(b []byte, i int) int {
	if i+1 >= len(b) {
		return 0
	}
	switch b[i+1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if i+5 >= len(b) || b[i+2] != '0' || b[i+3] != '0' || (b[i+4] != '0' && b[i+4] != '1') {
			return 0
		}
		lo := b[i+5]
		switch {
		case '0' <= lo && lo <= '9':
			lo -= '0'
		case 'a' <= lo && lo <= 'f':
			lo -= 'a' - 10
		default:
			return 0
		}
		switch c := (b[i+4]-'0')<<4 | lo; c {
		case '\b', '\t', '\n', '\f', '\r':
			return 0 // written \b, \t, ...
		}
		return 6
	}
	return 0
}

// scanEscaped goes on with scanString's string from its first escape that
// is not its own canonical form (\/ or a \u escape), at
// data[i], writing its canonical form to the arena: the bytes before it,
// then each escape's canonical form and the bytes between. Each word read
// is stored whole at the end of the arena before it is looked at, and the
// arena's length then takes the bytes before the word's first stop: no
// copy per run of plain bytes. high is scanString's so far.
func (p *parser) scanEscaped(start, i int, high uint64) (s span, ok bool) {
	b := p.data
	a0 := len(p.arena)
	out := append(p.arena, b[start:i]...)
	for i < len(b) {
		if cap(out)-len(out) < 16 {
			// Room for a word and an escape's canonical form (at most 6).
			out = slices.Grow(out, max(len(out), 256))
		}
		x := jsonscan.Word(b, i)
		high |= x
		n := len(out)
		binary.LittleEndian.PutUint64(out[n:n+8], x)
		m := jsonscan.StopMask(x)
		if m == 0 {
			out = out[:n+8]
			i += 8
			continue
		}
		k := bits.TrailingZeros64(m) >> 3
		out = out[:n+k]
		j := i + k
		switch c := b[j]; {
		case c == '"':
			if high&jsonscan.Highs != 0 && !p.validUTF8 && !utf8.Valid(b[start:j]) {
				return span{}, false
			}
			p.arena = out
			p.pos = j + 1
			return span{start: int32(a0), end: int32(len(out)), arena: true}, true
		case c == '\\':
			var e int
			out, e = transcode(out, b, j)
			if e == 0 {
				return span{}, false
			}
			i = j + e
		default: // a control character
			return span{}, false
		}
	}
	return span{}, false
}

// transcode appends to dst the canonical form of the escape at b[i] (a
// backslash) and returns its length in b, 0 for an escape str refuses: 2,
// 6 for a \u escape, 12 for a surrogate pair.
func transcode(dst, b []byte, i int) ([]byte, int) {
	if i+1 >= len(b) {
		return dst, 0
	}
	switch c := b[i+1]; c {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return append(dst, '\\', c), 2
	case '/':
		return append(dst, '/'), 2
	case 'u':
		r, ok := hex4(b[i+2:])
		switch {
		case !ok:
			return dst, 0
		case !utf16.IsSurrogate(r):
			if r < utf8.RuneSelf {
				return appendByte(dst, byte(r)), 6
			}
			return utf8.AppendRune(dst, r), 6
		case r >= 0xDC00:
			return dst, 0
		}
		if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
			return dst, 0
		}
		lo, ok := hex4(b[i+8:])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return dst, 0
		}
		return utf8.AppendRune(dst, utf16.DecodeRune(r, lo)), 12
	}
	return dst, 0
}

// appendByte appends an ASCII character as appendString writes it inside a
// string.
func appendByte(dst []byte, c byte) []byte {
	if e := shortEscape[c]; e != 0 {
		return append(dst, '\\', e)
	}
	if c < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
	}
	return append(dst, c)
}

// shortEscape is, for each character RFC 8785 writes as a two-character
// escape, the character after its backslash; 0 for the others.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}
