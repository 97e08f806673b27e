package clientapi

import "strings"

// Sanitize keeps a client-supplied string printable and short for messages
// and logs.
func Sanitize(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
