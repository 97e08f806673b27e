package upstream

import "bytes"

// IsNull reports whether v, spaces aside, is absent or null.
func IsNull(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}
