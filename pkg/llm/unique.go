package llm

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// DuplicateMember is the error of a request body with an object that has
// the member name twice: which of the two counts differs from parser to
// parser (the gateway could read one and a provider the other), so the
// request is refused before any provider call. top: the object is the
// body itself, and the error's param names the member.
func DuplicateMember(name string, top bool) *Error {
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	param := ""
	if top && utf8.ValidString(name) {
		param = name
	}
	return invalid(param, "request body has an object with the member %s twice: send each member once (which one counts differs from parser to parser)", strconv.Quote(name))
}

// CheckUnique refuses a JSON body with an object, at any depth, that has
// a member name twice (DuplicateMember); a body that is not valid JSON is
// not its to judge (nil). It walks the body with encoding/json: it is the
// slow path, for the bodies the request scanners leave to encoding/json.
func CheckUnique(body []byte) error {
	type level struct {
		names   map[string]struct{}
		object  bool
		nameNow bool // an object's next token is a member name
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:top]
			if top > 0 && stack[top-1].object {
				stack[top-1].nameNow = true
			}
			continue
		}
		if top >= 0 && stack[top].nameNow {
			name, _ := tok.(string)
			if _, seen := stack[top].names[name]; seen {
				return DuplicateMember(name, top == 0)
			}
			if stack[top].names == nil {
				stack[top].names = map[string]struct{}{}
			}
			stack[top].names[name] = struct{}{}
			stack[top].nameNow = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, level{object: d == '{', nameNow: d == '{'})
			continue
		}
		if top >= 0 && stack[top].object {
			stack[top].nameNow = true
		}
	}
}
