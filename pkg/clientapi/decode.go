package clientapi

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// What the client APIs' request checks share: the bound on max_tokens, a
// client's string quoted for an error message, a member present and not
// null.

// MaxTokens bounds max_tokens so it fits any upstream's integer.
const MaxTokens = math.MaxInt32

// Quote quotes a client's string for a message, cut short and made
// printable.
func Quote(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) {
		return "(unprintable)"
	}
	return strconv.Quote(s)
}

// Present returns a field that is there and not null.
func Present(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := m[name]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}
