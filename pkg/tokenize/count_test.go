//go:build integration

package tokenize

import "math"

// count is the number of tokens of text. Bytes that are not UTF-8 count as
// U+FFFD, each, as they do in github.com/pkoukk/tiktoken-go.
func (e *encoder) count(text string) int {
	b := mergeBudget{left: math.MaxInt}
	n, _ := e.countBudget(text, &b)
	return n
}
