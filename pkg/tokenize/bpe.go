package tokenize

import (
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// encoder counts the tokens of a text by one byte-pair encoding: the text
// is split into pieces by the encoding's pattern, and each piece that is
// not a token itself is merged pair by pair, the pair of lowest rank
// first (the leftmost of equal ones), until no adjacent pair is a token.
// That is tiktoken's encode_ordinary, token for token.
//
// github.com/pkoukk/tiktoken-go does the merging by scanning every part
// for the lowest rank after each merge, which is quadratic in a piece's
// length: a piece of 128 KiB with no space in it (one long word, a run of
// CJK characters or emoji) takes seconds (BenchmarkLibraryWorstCase).
// Here pieces longer than smallPiece bytes are merged with a heap over a
// linked list of parts, in O(n log n), as OpenAI's tiktoken does for its
// long pieces.
type encoder struct {
	ranks  map[string]int
	re     *regexp2.Regexp
	maxTok int // the longest token, in bytes: no longer pair is a token
	scan   int // the longest piece merged by scanning (smallPiece)
}

// smallPiece is the longest piece merged by scanning, which is the faster
// way for the short pieces of ordinary text.
const smallPiece = 64

func newEncoder(ranks map[string]int, pattern string) (*encoder, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, err
	}
	e := &encoder{ranks: ranks, re: re, scan: smallPiece}
	for t := range ranks {
		e.maxTok = max(e.maxTok, len(t))
	}
	return e, nil
}

// count is the number of tokens of text. Bytes that are not UTF-8 count as
// U+FFFD, each, as they do in github.com/pkoukk/tiktoken-go.
func (e *encoder) count(text string) int {
	runes := []rune(text)
	if !utf8.ValidString(text) {
		text = string(runes)
	}
	n := 0
	r, b := 0, 0 // the rune and byte offsets of the scan
	m, _ := e.re.FindRunesMatch(runes)
	for m != nil {
		for ; r < m.Index; r++ {
			b += utf8.RuneLen(runes[r])
		}
		start := b
		for end := m.Index + m.Length; r < end; r++ {
			b += utf8.RuneLen(runes[r])
		}
		n += e.pieceCount(text[start:b])
		m, _ = e.re.FindNextMatch(m)
	}
	return n
}

// pieceCount is the number of tokens of one piece of the split.
func (e *encoder) pieceCount(piece string) int {
	if _, ok := e.ranks[piece]; ok || len(piece) == 1 {
		return 1
	}
	if len(piece) <= e.scan {
		return e.mergeScan(piece)
	}
	return e.mergeHeap(piece)
}

// rank is the rank of piece[i:j] as a token, or none.
func (e *encoder) rank(piece string, i, j int) int {
	if j-i > e.maxTok {
		return none
	}
	if r, ok := e.ranks[piece[i:j]]; ok {
		return r
	}
	return none
}

const none = int(^uint(0) >> 1) // no token: ranks above every real one

// mergeScan merges the way tiktoken's reference does: after each merge, a
// scan of the parts for the lowest rank.
func (e *encoder) mergeScan(piece string) int {
	type part struct{ start, rank int }
	var buf [smallPiece + 1]part
	parts := buf[:len(piece)+1]
	for i := range parts {
		parts[i] = part{i, none}
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = e.rank(piece, i, i+2)
	}
	pairRank := func(i int) int { // parts[i] and parts[i+1] as one token
		if i+3 < len(parts) {
			return e.rank(piece, parts[i].start, parts[i+3].start)
		}
		return none
	}
	for len(parts) > 1 {
		minRank, i := none, -1
		for j := 0; j < len(parts)-1; j++ {
			if parts[j].rank < minRank {
				minRank, i = parts[j].rank, j
			}
		}
		if i < 0 {
			break
		}
		parts[i].rank = pairRank(i)
		if i > 0 {
			parts[i-1].rank = pairRank(i - 1)
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	return len(parts) - 1
}

// mergeHeap merges as mergeScan does, in O(n log n): the parts are a
// linked list over the piece's bytes (a part starting at byte i ends where
// next[i] starts), and the candidate pairs a heap ordered by rank, then
// position. A merge makes the pairs of its neighbours stale; a stale entry
// is dropped when it comes out (its left part is gone, or the pair no
// longer ends where it did).
func (e *encoder) mergeHeap(piece string) int {
	n := int32(len(piece))
	next := make([]int32, n)
	prev := make([]int32, n)
	gone := make([]bool, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	h := make(pairHeap, 0, n)
	for i := int32(0); i+1 < n; i++ {
		if r := e.rank(piece, int(i), int(i+2)); r != none {
			h = append(h, pair{rank: r, start: i, end: i + 2})
		}
	}
	h.init()
	// end is where the pair starting at part i ends, or -1 for the last
	// part.
	end := func(i int32) int32 {
		if j := next[i]; j < n {
			return next[j]
		}
		return -1
	}
	parts := int(n)
	for len(h) > 0 {
		p := h.pop()
		if gone[p.start] || end(p.start) != p.end {
			continue // stale
		}
		i, j := p.start, next[p.start]
		gone[j] = true
		next[i] = next[j]
		if next[i] < n {
			prev[next[i]] = i
		}
		parts--
		if k := end(i); k >= 0 {
			if r := e.rank(piece, int(i), int(k)); r != none {
				h.push(pair{rank: r, start: i, end: k})
			}
		}
		if q := prev[i]; q >= 0 {
			if r := e.rank(piece, int(q), int(next[i])); r != none {
				h.push(pair{rank: r, start: q, end: next[i]})
			}
		}
	}
	return parts
}

// pair is a candidate merge: the part starting at byte start with the one
// after it, which ends at byte end.
type pair struct {
	rank       int
	start, end int32
}

func (p pair) less(q pair) bool {
	return p.rank < q.rank || p.rank == q.rank && p.start < q.start
}

// pairHeap is a binary min-heap of pairs.
type pairHeap []pair

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if !s[i].less(s[up]) {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
}

func (h *pairHeap) pop() pair {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
