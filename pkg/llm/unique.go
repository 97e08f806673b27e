package llm

import (
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
	return Invalid(param, "request body has an object with the member %s twice: send each member once (which one counts differs from parser to parser)", strconv.Quote(name))
}

// CheckUnique refuses a JSON body with an object, at any depth, that has
// a member name twice (DuplicateMember); a body that is not valid JSON is
// not its to judge (nil). It is the request scanner's own check
// (uniqueObject) over the whole body, as deep as encoding/json reads, for
// the bodies the request scanners leave to encoding/json; values after
// the first are read too, as a json.Decoder would.
func CheckUnique(body []byte) error {
	s := scanner{b: body, unique: true, maxDepth: maxJSONDepth}
	for {
		first := s.peek()
		if first == 0 && s.i == len(body) {
			return nil
		}
		if s.skip(1) {
			continue
		}
		if s.dup == nil {
			return nil
		}
		// The outermost object of a value that is an array is not the body.
		return DuplicateMember(*s.dup, s.dupTop && first == '{')
	}
}
