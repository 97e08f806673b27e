// Package jsonstr appends Go strings as JSON strings, for the encoders
// written by hand on hot paths (pkg/llm's answers, pkg/metrics' EMF lines):
// one implementation of the escaping rules instead of one per encoder.
// BenchmarkAppend keeps it: encoding/json allocates for each string, and
// jsontext's AppendQuote leaves U+2028 and U+2029 unescaped.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s quoted as a JSON string: '"', '\\' and the control
// characters escaped (as \n, \r, \t, \b, \f or \u00xx), U+2028 and U+2029
// escaped, each byte of invalid UTF-8 replaced by U+FFFD; with html, also
// '<', '>' and '&' (as \u003c, \u003e, \u0026). With html it is byte for
// byte what encoding/json's Marshal writes for a string. The result is
// valid JSON for any s and never holds a raw line break.
func Append(b []byte, s string, html bool) []byte {
	b = append(b, '"')
	start := 0 // s[start:i] is pending, needing no escape
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
