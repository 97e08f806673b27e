package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// completionChunks turns a chat.completion, the answer of an upstream that
// ignored "stream": true, into the chunks it would have streamed: one per
// choice, its message as the delta, then a usage-only chunk when there is
// usage. Every field it does not know (system_fingerprint, logprobs,
// annotations, ...) is kept, in the upstream's order, so that it passes
// through as it would have in a stream.
func completionChunks(body []byte) ([]llm.Chunk, error) {
	// ParseChunk checks that the body is one JSON object of the right shape
	// and finds an error object sent with status 200.
	if _, err := llm.ParseChunk(body); err != nil {
		var ce *llm.ChunkError
		if errors.As(err, &ce) {
			return nil, chunkFailure(err)
		}
		return nil, malformed(err)
	}
	top, err := members(body)
	if err != nil {
		return nil, malformed(err)
	}
	var choices, usage json.RawMessage
	for _, m := range top {
		switch m.key {
		case "choices":
			choices = m.val
		case "usage":
			usage = m.val
		}
	}
	var raws [][]byte
	if !jsonobj.IsNull(choices) {
		var list []json.RawMessage
		if err := json.Unmarshal(choices, &list); err != nil {
			return nil, malformed(err)
		}
		for i, choice := range list {
			delta, err := choiceDelta(choice, i)
			if err != nil {
				return nil, malformed(err)
			}
			raws = append(raws, chunkObject(top, append(append([]byte{'['}, delta...), ']'), nil))
		}
	}
	if !jsonobj.IsNull(usage) {
		raws = append(raws, chunkObject(top, []byte("[]"), usage))
	}
	chunks := make([]llm.Chunk, 0, len(raws))
	for _, raw := range raws {
		// A message field of a type a chunk's delta cannot have (content
		// that is not a string, say) shows up here.
		c, err := llm.ParseChunk(raw)
		if err != nil {
			return nil, malformed(err)
		}
		chunks = append(chunks, c)
	}
	return chunks, nil
}

func malformed(err error) *llm.ProviderError {
	return &llm.ProviderError{Class: llm.FailTransient, Message: "malformed upstream answer", Err: err}
}

// object writes a JSON object field by field.
type object struct{ b bytes.Buffer }

func (o *object) field(key string, val []byte) {
	if o.b.Len() == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	k, _ := json.Marshal(key) // a string always marshals
	o.b.Write(k)
	o.b.WriteByte(':')
	o.b.Write(val)
}

func (o *object) bytes() []byte {
	if o.b.Len() == 0 {
		return []byte("{}")
	}
	o.b.WriteByte('}')
	return o.b.Bytes()
}

// chunkObject writes the chunk: the completion's own fields in order, with
// "object" made "chat.completion.chunk", "choices" replaced and "usage" set
// to usage or left out.
func chunkObject(top []member, choices, usage json.RawMessage) []byte {
	var o object
	chunkType := []byte(`"` + chat.ObjectChunk + `"`)
	sawObject, sawChoices := false, false
	for _, m := range top {
		switch m.key {
		case "object":
			if !sawObject {
				o.field("object", chunkType)
				sawObject = true
			}
		case "choices":
			if !sawChoices {
				o.field("choices", choices)
				sawChoices = true
			}
		case "usage":
			if usage != nil {
				o.field("usage", usage)
				usage = nil
			}
		default:
			o.field(m.key, m.val)
		}
	}
	if !sawObject {
		o.field("object", chunkType)
	}
	if !sawChoices {
		o.field("choices", choices)
	}
	if usage != nil {
		o.field("usage", usage)
	}
	return o.bytes()
}

// choiceDelta turns a completion choice into a chunk choice: "message"
// becomes "delta", with an "index" added to each tool call, and the choice
// keeps its index (or is given its place in the list).
func choiceDelta(choice json.RawMessage, i int) ([]byte, error) {
	return withIndex(choice, i, func(o *object, m member) error {
		if m.key != "message" {
			o.field(m.key, m.val)
			return nil
		}
		delta, err := messageDelta(m.val)
		if err != nil {
			return err
		}
		o.field("delta", delta)
		return nil
	})
}

// messageDelta is the message with each tool call given its "index", as
// streamed tool calls carry one.
func messageDelta(msg json.RawMessage) ([]byte, error) {
	if jsonobj.IsNull(msg) {
		return []byte("{}"), nil
	}
	fields, err := members(msg)
	if err != nil {
		return nil, err
	}
	var o object
	for _, m := range fields {
		if m.key != "tool_calls" || jsonobj.IsNull(m.val) {
			o.field(m.key, m.val)
			continue
		}
		var calls []json.RawMessage
		if err := json.Unmarshal(m.val, &calls); err != nil {
			return nil, err
		}
		list := []byte{'['}
		for j, call := range calls {
			if j > 0 {
				list = append(list, ',')
			}
			withIndex, err := toolCallDelta(call, j)
			if err != nil {
				return nil, err
			}
			list = append(list, withIndex...)
		}
		o.field("tool_calls", append(list, ']'))
	}
	return o.bytes(), nil
}

func toolCallDelta(call json.RawMessage, j int) ([]byte, error) {
	return withIndex(call, j, nil)
}

// withIndex copies the JSON object raw, a choice or a tool call at
// position i of its list, with "index": i first unless raw has an index of
// its own. Each field is copied by field, which may rewrite it, or as it is
// when field is nil.
func withIndex(raw json.RawMessage, i int, field func(o *object, m member) error) ([]byte, error) {
	fields, err := members(raw)
	if err != nil {
		return nil, err
	}
	var o object
	if !hasKey(fields, "index") {
		o.field("index", strconv.AppendInt(nil, int64(i), 10))
	}
	for _, m := range fields {
		if field == nil {
			o.field(m.key, m.val)
		} else if err := field(&o, m); err != nil {
			return nil, err
		}
	}
	return o.bytes(), nil
}

func hasKey(ms []member, key string) bool {
	for _, m := range ms {
		if m.key == key {
			return true
		}
	}
	return false
}

// member is one field of a JSON object.
type member struct {
	key string
	val json.RawMessage
}

var errNotObject = errors.New("not a JSON object")

// members returns the fields of a JSON object in their order.
func members(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errNotObject
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		ms = append(ms, member{key: key, val: val})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject
	}
	return ms, nil
}
