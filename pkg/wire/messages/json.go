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

// marshal encodes a value of this package's own types compactly and
// without HTML escaping, as the upstreams write JSON. The only raw values
// inside are ones a decoder accepted, so it does not fail: were it to,
// the value is null.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
