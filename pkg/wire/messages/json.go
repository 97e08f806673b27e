package messages

import (
	"bytes"
	"encoding/json"
)

// isNull reports whether a member's value is absent or null.
func isNull(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// nonNull is v, or nil when v is absent or null (isNull).
func nonNull(v json.RawMessage) json.RawMessage {
	if isNull(v) {
		return nil
	}
	return v
}

// marshal encodes v compactly and without HTML escaping, as the upstreams
// write JSON. v is one of this package's own types, which always encode.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("messages: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
