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
	split  splitter // the split by hand, when byHand
	byHand bool
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
	e.split, e.byHand = splitterFor(pattern)
	for t := range ranks {
		e.maxTok = max(e.maxTok, len(t))
	}
	return e, nil
}

// mergeBudget is how many more bytes a count may merge pair by pair, and
// the bytes and tokens of the pieces it merged: their rate is that of the
// pieces past the budget.
type mergeBudget struct {
	left, bytes, tokens int
}

// estimate is the tokens of n bytes of pieces past the budget, at the rate
// of those merged (one per four bytes before any).
func (b *mergeBudget) estimate(n int) int {
	if n == 0 {
		return 0
	}
	if b.bytes == 0 {
		return Fallback(n)
	}
	return int((int64(n)*int64(b.tokens) + int64(b.bytes) - 1) / int64(b.bytes))
}

// countBudget counts the tokens of text: a piece that is a token is one, a
// piece that is not is merged pair by pair while b has bytes left (a piece
// longer than what is left, by its first bytes). It returns the tokens
// counted so and the bytes of the pieces left over, to be counted at b's
// rate once the count is done (b.estimate).
func (e *encoder) countBudget(text string, b *mergeBudget) (tokens, over int) {
	if !utf8.ValidString(text) {
		text = string([]rune(text))
	}
	for start, end := range e.pieces(text) {
		piece := text[start:end]
		switch {
		case e.isToken(piece):
			tokens++
		case b.left >= len(piece):
			n := e.mergeCount(piece)
			b.left -= len(piece)
			b.bytes, b.tokens = b.bytes+len(piece), b.tokens+n
			tokens += n
		default:
			cut := b.left
			for cut > 0 && !utf8.RuneStart(piece[cut]) {
				cut--
			}
			b.left = 0
			if cut > 0 {
				n := e.mergeCount(piece[:cut])
				b.bytes, b.tokens = b.bytes+cut, b.tokens+n
				tokens += n
			}
			over += len(piece) - cut
		}
	}
	return tokens, over
}

// pieces yields the start and end of each piece of the split of text
// (valid UTF-8), in order.
func (e *encoder) pieces(text string) func(yield func(start, end int) bool) {
	return func(yield func(start, end int) bool) {
		if !e.byHand {
			e.piecesByRegexp(text, yield)
			return
		}
		for i := 0; i < len(text); {
			j := e.split.next(text, i)
			if j < 0 { // no piece starts here: the engine moves on a character
				_, size := utf8.DecodeRuneInString(text[i:])
				i += size
				continue
			}
			if !yield(i, j) {
				return
			}
			i = j
		}
	}
}

// piecesByRegexp is pieces, the text split by the encoding's pattern.
func (e *encoder) piecesByRegexp(text string, yield func(start, end int) bool) {
	runes := []rune(text)
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
		if !yield(start, b) {
			return
		}
		m, _ = e.re.FindNextMatch(m)
	}
}

// isToken reports whether piece is one token.
func (e *encoder) isToken(piece string) bool {
	if len(piece) == 1 {
		return true
	}
	if len(piece) > e.maxTok {
		return false
	}
	_, ok := e.ranks[piece]
	return ok
}

// mergeCount is the number of tokens of a piece that is not one token.
func (e *encoder) mergeCount(piece string) int {
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

// rank32 is rank, -1 for none.
func (e *encoder) rank32(piece string, i, j int) int32 {
	if r := e.rank(piece, i, j); r != none {
		return int32(r)
	}
	return -1
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
// the next one starts), and the candidate pairs a heap ordered by rank,
// then position. A merge makes the pairs of its neighbours stale; a stale
// entry is dropped when it comes out (its left part is gone, or the pair
// no longer ends where it did). The rank of two adjacent tokens is looked
// up by theirs in a small cache first: a long piece repeats its pairs.
func (e *encoder) mergeHeap(piece string) int {
	n := int32(len(piece))
	parts := make([]part, n+1) // parts[n] ends the list
	for i := range n {
		parts[i] = part{next: i + 1, prev: i - 1, rank: e.rank32(piece, int(i), int(i+1))}
	}
	parts[n] = part{next: n, prev: n - 1, rank: -1}
	c := newPairCache(len(piece))
	// pairRank is the rank of the parts at i and j (its next) as one
	// token, which ends at end.
	pairRank := func(i, j, end int32) int32 {
		a, b := parts[i].rank, parts[j].rank
		if a < 0 || b < 0 {
			return e.rank32(piece, int(i), int(end))
		}
		key := uint64(a)<<32 | uint64(b)
		slot := &c[(key*0x9E3779B97F4A7C15)>>(64-pairCacheBits)&uint64(len(c)-1)]
		if slot.key == key+1 {
			return slot.rank
		}
		r := e.rank32(piece, int(i), int(end))
		*slot = pairSlot{key: key + 1, rank: r}
		return r
	}
	h := make(pairHeap, 0, n)
	for i := int32(0); i+1 < n; i++ {
		if r := pairRank(i, i+1, i+2); r >= 0 {
			h = append(h, pair{key: uint64(r)<<32 | uint64(i), end: i + 2})
		}
	}
	h.init()
	count := int(n)
	for len(h) > 0 {
		p := h.pop()
		i := int32(p.key)
		pi := &parts[i]
		if pi.gone || pi.next >= n || parts[pi.next].next != p.end {
			continue // stale
		}
		j := pi.next
		parts[j].gone = true
		pi.next, pi.rank = p.end, int32(p.key>>32)
		parts[p.end].prev = i
		count--
		if k := p.end; k < n {
			if r := pairRank(i, k, parts[k].next); r >= 0 {
				h.push(pair{key: uint64(r)<<32 | uint64(i), end: parts[k].next})
			}
		}
		if q := pi.prev; q >= 0 {
			if r := pairRank(q, i, p.end); r >= 0 {
				h.push(pair{key: uint64(r)<<32 | uint64(q), end: p.end})
			}
		}
	}
	return count
}

// part is a part of a piece being merged: the token from its byte to the
// next part's, and its rank (-1: not a token).
type part struct {
	next, prev, rank int32
	gone             bool
}

// pairCache maps the ranks of two adjacent tokens (key+1; 0 is empty) to
// the rank of their concatenation, or -1.
type pairCache []pairSlot

type pairSlot struct {
	key  uint64
	rank int32
}

const pairCacheBits = 12

func newPairCache(n int) pairCache {
	size := 64
	for size < n && size < 1<<pairCacheBits {
		size *= 2
	}
	return make(pairCache, size)
}

// pair is a candidate merge: the part starting at byte int32(key) with the
// one after it, whose concatenation ranks key>>32 and ends at byte end.
type pair struct {
	key uint64
	end int32
}

func (p pair) less(q pair) bool { return p.key < q.key }

// pairHeap is a 4-ary min-heap of pairs (shallower than a binary one,
// for the fewer cache misses of a long piece's).
type pairHeap []pair

func (h pairHeap) init() {
	for i := (len(h) - 2) / 4; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	s := *h
	i := len(s) - 1
	for i > 0 {
		up := (i - 1) / 4
		if !p.less(s[up]) {
			break
		}
		s[i] = s[up]
		i = up
	}
	s[i] = p
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
	if i >= len(h) {
		return
	}
	p := h[i]
	for {
		c := 4*i + 1
		if c >= len(h) {
			break
		}
		m := c
		for k := c + 1; k < min(c+4, len(h)); k++ {
			if h[k].less(h[m]) {
				m = k
			}
		}
		if !h[m].less(p) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = p
}
