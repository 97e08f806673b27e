// Package jsonscan holds the word-at-a-time steps the hand-written JSON
// scanners share (pkg/llm's request and chunk scanner, pkg/canonjson's
// canonicalizer): strings are scanned eight bytes at a time, each word
// checked at once for the bytes that end a run of plain string bytes, so
// that the long texts of a large request cost a fraction of a nanosecond a
// byte (BenchmarkDecodeChatRequest in pkg/llm, BenchmarkJSONText in
// pkg/canonjson).
package jsonscan

import "encoding/binary"

const (
	ones = 0x0101010101010101
	// Highs are the high bits of a word's eight bytes: set in a word with
	// a byte that is not ASCII.
	Highs = 0x8080808080808080
)

// StopMask flags, in the high bit of each byte of x (little-endian), the
// bytes that are '"', '\\' or below 0x20. The lowest flag is always right;
// a flag above a flagged byte may be wrong (a borrow runs upwards), so a
// flagged byte is looked at before it is acted on.
func StopMask(x uint64) uint64 {
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return (((q - ones) &^ q) | ((b - ones) &^ b) | ((x - ones*0x20) &^ x)) & Highs
}

// Word is the eight bytes of b from i, little-endian; past the end of b
// they are 'a', which StopMask never flags.
func Word(b []byte, i int) uint64 {
	if i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:])
	}
	w := [8]byte{'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a'}
	copy(w[:], b[i:])
	return binary.LittleEndian.Uint64(w[:])
}

// SkipSpace is the index of the first byte of b from i that is not JSON
// whitespace (len(b) when there is none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && space[b[i]] {
		i++
	}
	return i
}

// space flags JSON's whitespace bytes.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}
