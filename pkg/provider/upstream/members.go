package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Object is a JSON object's members by their exact keys: an adapter that
// translates a request reads each key as written (a "Model" is not
// "model"), so that what it sends depends on the members, never on their
// order or case.
type Object map[string]json.RawMessage

var errNotObject = errors.New("not a JSON object")

// ParseObject reads raw, which must be a JSON object.
func ParseObject(raw json.RawMessage) (Object, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errNotObject
	}
	var o Object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// Str is member k as a string; ok is false when it is absent, null or not
// a string.
func (o Object) Str(k string) (string, bool) {
	v := bytes.TrimSpace(o[k])
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// List is an array's elements: none for null or absent, and ok false for
// anything but an array.
func List(raw json.RawMessage) (l []json.RawMessage, ok bool) {
	raw = bytes.TrimSpace(raw)
	if IsNull(raw) {
		return nil, true
	}
	if raw[0] != '[' || json.Unmarshal(raw, &l) != nil {
		return nil, false
	}
	return l, true
}

// IsNull reports whether v, spaces aside, is absent or null.
func IsNull(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// NonNull is v, or nil when v is absent or null (IsNull).
func NonNull(v json.RawMessage) json.RawMessage {
	if IsNull(v) {
		return nil
	}
	return v
}

// Marshal encodes v compactly and without HTML escaping, as the upstreams
// write JSON. v is one of the adapters' own types, which always encode.
func Marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("upstream: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
