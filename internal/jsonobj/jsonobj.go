// Package jsonobj reads a JSON object's members as written, for the
// translations and adapters that read a request member by member: an
// object by its exact keys, a member as a string, an array's elements, a
// number, null and absent alike; and encodes their own values compactly,
// as the upstreams write JSON. It imports the standard library only, so
// that the hub and the wire packages can share it.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// Object is a JSON object's members by their exact keys: a translation
// reads each key as written (a "Model" is not "model"), so that what it
// writes depends on the members, never on their order or case.
type Object map[string]json.RawMessage

// ErrNotObject is Parse's error for a value that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// Parse reads raw, which must be a JSON object.
func Parse(raw json.RawMessage) (Object, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, ErrNotObject
	}
	var o Object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// Str is member k as a string; ok is false when it is absent, null or not
// a string.
func (o Object) Str(k string) (string, bool) { return String(o[k]) }

// String is v as a string; ok is false when it is absent, null or not a
// string.
func String(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// Elements is an array's elements: none for null or absent, and ok false
// for anything but an array.
func Elements(raw json.RawMessage) (l []json.RawMessage, ok bool) {
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

// Number reads a JSON number that fits a float64: ok is false for
// anything else (a string, a literal, a number out of range).
func Number(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// Marshal encodes v compactly and without HTML escaping, as the upstreams
// write JSON. v is a value of the caller's own types, whose only raw
// values are ones a decoder accepted, so it does not fail: were it to, the
// value is null.
func Marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
