package llm

import (
	"encoding/json"
	"unicode/utf8"
)

// ObjectKeys are the member names by which a Chat Completions request
// can name an object stored at the provider: a file content part's
// file_id, an assistant message's audio (its id). DecodeChatRequest notes
// whether the body has a member of one of these names at any depth
// (ChatRequest.MayNameObject), so that a body without one is not searched
// again for a reference.
var ObjectKeys = []string{"file_id", "audio"}

// isObjectKey reports whether key, as written without escapes, is one of
// ObjectKeys.
func isObjectKey(key []byte) bool {
	for _, k := range ObjectKeys {
		if string(key) == k {
			return true
		}
	}
	return false
}

// splitChat is splitChatFrom on the scanner's body, as it is set up (a
// unique scanner fails on a member name given twice, and sets s.dup).
func (s *scanner) splitChat() (fields map[string]json.RawMessage, msgsOK, ok bool) {
	body := s.b
	if s.peek() != '{' {
		return nil, false, false
	}
	fields = make(map[string]json.RawMessage, 8)
	ok = s.object(func(key []byte, esc bool) bool {
		if esc || !utf8.Valid(key) {
			return false
		}
		var v json.RawMessage
		if string(key) == "messages" {
			// A key given twice keeps its last value: msgsOK follows it.
			start := s.i
			if msgsOK = s.messages(); msgsOK {
				v = body[start:s.i:s.i]
			} else {
				s.i = start
			}
		}
		if v == nil && !s.raw(&v) {
			return false
		}
		fields[string(key)] = v
		return true
	})
	if !ok {
		return nil, false, false
	}
	s.ws()
	if s.i != len(body) {
		return nil, false, false
	}
	return fields, msgsOK, true
}

// messages consumes a messages array when messagesOK's checks pass for
// sure (see messagesOK), leaving s.i after it; otherwise it returns false
// with s.i anywhere. A large body's second half of messages is checked on
// a second goroutine (msgTail).
func (s *scanner) messages() bool {
	if s.peek() != '[' {
		return false
	}
	t := startMsgTail(s)
	defer t.finish()
	n := 0
	ok := s.array(func() bool {
		if t != nil && s.i == t.at {
			at := t
			t = nil
			if m, end, ok := at.result(); ok {
				// The rest of the array's messages, checked there; the
				// array ends at end.
				n += m
				s.i = end
				s.objectKey = s.objectKey || at.objectKey
				return true
			}
		}
		n++
		return s.message()
	})
	return ok && n > 0
}

// message consumes one element of a messages array when messagesOK's
// checks pass for sure.
func (s *scanner) message() bool {
	if s.peek() != '{' {
		return false
	}
	// The role is checked, not decoded: a string whose text is not empty
	// decodes to a string that is not empty.
	role := false
	return s.fields(messageFields, func(i int) bool {
		if i < 0 {
			return s.skip(2)
		}
		if s.peek() != '"' {
			return false
		}
		start := s.i
		if _, ok := s.skipString(); !ok {
			return false
		}
		role = s.i-start > 2
		return true
	}) && role
}
