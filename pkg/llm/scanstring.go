package llm

import (
	"bytes"
	"math/bits"

	"github.com/buzzgate/buzzgate/internal/jsonscan"
)

// stringEnd checks the string whose contents start at b[i] as JSON does
// (its escapes well-formed, no control characters) and returns the index
// just past its closing quote; esc reports a backslash in it. ok is false
// for a string that is malformed or not closed.
func stringEnd(b []byte, i int) (end int, esc, ok bool) {
	// next is the first byte not yet consumed: the bytes of an escape (a
	// quote or a backslash among them) are skipped.
	next := i
	for i < len(b) {
		for m := jsonscan.StopMask(jsonscan.Word(b, i)); m != 0; m &= m - 1 {
			j := i + bits.TrailingZeros64(m)>>3
			if j < next {
				continue
			}
			switch c := b[j]; {
			case c == '"':
				return j + 1, esc, true
			case c == '\\':
				esc = true
				if j+1 < len(b) && shortEscape[b[j+1]] {
					next = j + 2
					continue
				}
				n := escapeLen(b, j)
				if n == 0 {
					return 0, false, false
				}
				next = j + n
			case c < 0x20:
				return 0, false, false
			}
		}
		i = max(i+8, next)
	}
	return 0, false, false
}

// quoteEnd is stringEnd without the checks: it finds the quote that ends
// the string whose contents start at b[i] (the first one not escaped: after
// an even run of backslashes) and reports a backslash in it. Its search is
// bytes.IndexByte's, many times faster than stringEnd's, for text whose
// escapes and characters another parser checks.
func quoteEnd(b []byte, i int) (end int, esc, ok bool) {
	for j := i; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false, false
		}
		q := j + k
		n := 0
		for q-1-n >= i && b[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			esc = esc || n > 0 || bytes.IndexByte(b[i:q], '\\') >= 0
			return q + 1, esc, true
		}
		esc = true
		j = q + 1
	}
}

// shortEscape marks the characters that make a two-byte escape.
var shortEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// escapeLen is the length of the well-formed escape at b[i] (a backslash),
// or 0.
func escapeLen(b []byte, i int) int {
	if i+1 >= len(b) {
		return 0
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if i+6 > len(b) {
			return 0
		}
		for _, h := range b[i+2 : i+6] {
			if !isHex(h) {
				return 0
			}
		}
		return 6
	}
	return 0
}
