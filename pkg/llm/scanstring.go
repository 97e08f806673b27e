package llm

import (
	"encoding/binary"
	"math/bits"
)

// Strings are scanned eight bytes at a time: each word is checked at once
// for the bytes that end a run of plain string bytes, so that the long texts
// of a large request (a coding agent sends up to megabytes every turn) cost
// a fraction of a nanosecond a byte.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stopMask flags, in the high bit of each byte of x (little-endian), the
// bytes that are '"', '\\' or below 0x20. The lowest flag is always right;
// a flag above a flagged byte may be wrong (a borrow runs upwards), so a
// flagged byte is looked at before it is acted on.
func stopMask(x uint64) uint64 {
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return (((q - ones) &^ q) | ((b - ones) &^ b) | ((x - ones*0x20) &^ x)) & highs
}

// stringEnd checks the string whose contents start at b[i] as JSON does
// (its escapes well-formed, no control characters) and returns the index
// just past its closing quote; esc reports a backslash in it. ok is false
// for a string that is malformed or not closed.
func stringEnd(b []byte, i int) (end int, esc, ok bool) {
	// next is the first byte not yet consumed: the bytes of an escape (a
	// quote or a backslash among them) are skipped.
	next := i
	for i < len(b) {
		for m := stopMask(word(b, i)); m != 0; m &= m - 1 {
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

// word is the eight bytes of b from i, little-endian; past the end of b
// they are 'a', which stopMask never flags.
func word(b []byte, i int) uint64 {
	if i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:])
	}
	w := [8]byte{'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a'}
	copy(w[:], b[i:])
	return binary.LittleEndian.Uint64(w[:])
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
