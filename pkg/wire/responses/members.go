package responses

import (
	"bytes"
	"encoding/json"
	"errors"
)

// object is a JSON object's members by their exact keys: a translation
// reads each key as written (a "Model" is not "model"), so that what it
// writes depends on the members, never on their order or case.
type object map[string]json.RawMessage

var errNotObject = errors.New("not a JSON object")

// parseObject reads raw, which must be a JSON object.
func parseObject(raw json.RawMessage) (object, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errNotObject
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// Str is member k as a string; ok is false when it is absent, null or not
// a string.
func (o object) Str(k string) (string, bool) {
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

// elements is an array's elements: none for null or absent, and ok false
// for anything but an array.
func elements(raw json.RawMessage) (l []json.RawMessage, ok bool) {
	raw = bytes.TrimSpace(raw)
	if absent(raw) {
		return nil, true
	}
	if raw[0] != '[' || json.Unmarshal(raw, &l) != nil {
		return nil, false
	}
	return l, true
}

// nonNull is v, or nil when v is absent or null.
func nonNull(v json.RawMessage) json.RawMessage {
	if absent(v) {
		return nil
	}
	return v
}
