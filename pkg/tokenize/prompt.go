package tokenize

import (
	"encoding/json"
	"maps"
	"slices"
)

// PerMessage is the tokens a chat template adds around each message (its
// role and delimiters), and Priming those that start the answer: OpenAI's
// published rule for its chat models, used for every family.
const (
	PerMessage = 3
	Priming    = 3
)

// Prompt is the number of tokens of the prompt in a request body of any of
// the three client APIs (Chat Completions, Messages, Responses), as the
// model reads it, and whether the model's tokenizer counted them. It counts
//
//   - every string value, roles included, but those of the keys in
//     skipped (identifiers and types, images and files, signatures and
//     encrypted content, parameters that are not text);
//   - a tool's schema, and a tool call's input given as an object, as their
//     compact JSON;
//   - PerMessage for each element of "messages" or "input" (an input
//     that is a string is one message), for a Messages "system" and a
//     Responses "instructions", and Priming once.
//
// For a chat body this is OpenAI's published way to count a prompt. The
// pieces are counted in the order of their keys, so a body's count is the
// same every time; the pieces share ExactLimit and MergeLimit as one text
// would. A body that is not a JSON object counts by the fallback, one
// token per four bytes of it.
func (c *Counter) Prompt(model string, body []byte) (n int, exact bool) {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil || v == nil {
		return Fallback(len(body)), false
	}
	var pieces []string
	for _, k := range slices.Sorted(maps.Keys(v)) {
		x := v[k]
		switch {
		case skipped[k]:
		case k == "messages" || k == "input":
			switch x := x.(type) {
			case []any:
				n += PerMessage * len(x)
			case string:
				n += PerMessage // the Responses API's input as one user message
			}
			pieces = collect(pieces, k, x)
		case k == "system" || k == "instructions":
			n += PerMessage // a system message of its own
			pieces = collect(pieces, k, x)
		default:
			pieces = collect(pieces, k, x)
		}
	}
	n += Priming
	tk := c.encoding(EncodingFor(model))
	if tk == nil {
		size := 0
		for _, p := range pieces {
			size += len(p)
		}
		return n + Fallback(size), false
	}
	w := newWithin()
	for _, p := range pieces {
		w.add(tk, p)
	}
	n += w.total()
	return n, true
}

// skipped are the keys whose values the model does not read as text.
var skipped = map[string]bool{
	"model": true, "type": true, "id": true, "object": true, "status": true,
	"tool_call_id": true, "call_id": true, "tool_use_id": true, "previous_response_id": true,
	"signature": true, "encrypted_content": true, "redacted_thinking": true,
	"data": true, "image_url": true, "url": true, "file_id": true, "file_data": true, "file_url": true,
	"media_type": true, "detail": true, "cache_control": true,
	"metadata": true, "user": true, "safety_identifier": true, "prompt_cache_key": true,
	"service_tier": true, "tool_choice": true, "reasoning_effort": true, "effort": true,
	"stop": true, "stop_sequences": true, "stream_options": true, "include": true, "truncation": true,
	"modalities": true, "gateway": true, "provider": true, "anthropic_version": true,
}

// schemas are the keys whose object values the model reads as JSON text.
var schemas = map[string]bool{
	"parameters": true, "input_schema": true, "schema": true, "input": true, "arguments": true,
}

// collect appends the text pieces of the value x of key k.
func collect(pieces []string, k string, x any) []string {
	switch x := x.(type) {
	case string:
		if x != "" {
			pieces = append(pieces, x)
		}
	case map[string]any:
		if schemas[k] {
			if b, err := json.Marshal(x); err == nil {
				pieces = append(pieces, string(b))
			}
			return pieces
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if !skipped[k] {
				pieces = collect(pieces, k, x[k])
			}
		}
	case []any:
		for _, y := range x {
			pieces = collect(pieces, "", y) // an element is not its list's schema
		}
	}
	return pieces
}
