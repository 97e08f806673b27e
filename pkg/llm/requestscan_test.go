package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

// BenchmarkDecodeChatRequest: a coding agent's 1 MB body, decoded and
// turned into the upstream body.
func BenchmarkDecodeChatRequest(b *testing.B) {
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128`)
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeChatRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The split alone, by the hand scanner (with the message checks and
	// the duplicate-name check), on one goroutine and on two, and by
	// jsontext (which checks names for duplicates by default).
	for _, split := range []int{0, parallelMessages} {
		b.Run(fmt.Sprintf("split-hand-%d", split), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				s := scanner{b: body, split: split, unique: true}
				if _, msgsOK, ok := s.splitChat(); !ok || !msgsOK {
					b.Fatal("split failed")
				}
			}
		})
	}
	b.Run("split-jsontext", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := splitJSONText(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	req, err := DecodeChatRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("upstream", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := req.UpstreamBody("up"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// splitJSONText is splitChat's split by jsontext: the top-level members
// as slices of body, every value validated, every object's names checked
// for duplicates.
func splitJSONText(body []byte) (map[string]json.RawMessage, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("not an object: %v", err)
	}
	fields := make(map[string]json.RawMessage, 8)
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		fields[name] = body[end-len(v) : end : end]
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	return fields, nil
}

// skipStringRef is the byte-at-a-time string check stringEnd replaces, the
// reference FuzzStringEnd holds it to.
func skipStringRef(b []byte, i int) (end int, esc, ok bool) {
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, esc, true
		case c < 0x20:
			return 0, false, false
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return 0, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				i += 6
			default:
				return 0, false, false
			}
		default:
			i++
		}
	}
	return 0, false, false
}

// FuzzStringEnd: the word-at-a-time string check agrees with the
// byte-at-a-time one on any input, from any offset.
func FuzzStringEnd(f *testing.F) {
	for _, s := range []string{``, `a"`, `plain text longer than one word"`, `\n"`, `\""`, `\\"`, `\\\"x"`, `\u00e9"`, `\u00"`, `\x"`,
		"a\x01b\"", "é😀\"", `0123456\"7"`, `01234567\\\\\\\\\"`, `ab\"cd\\ef\ngh\tij\u0022kl"`, `\`, `\u12`, "tab\there\""} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		i := int(at) % (len(b) + 1)
		end, esc, ok := stringEnd(b, i)
		wEnd, wEsc, wOK := skipStringRef(b, i)
		if end != wEnd || esc != wEsc || ok != wOK {
			t.Fatalf("%q from %d: stringEnd %d %v %v, byte at a time %d %v %v", b, i, end, esc, ok, wEnd, wEsc, wOK)
		}
	})
}

// FuzzSplitChat: splitChat splits as splitObject does (FuzzSplitObject
// holds that to encoding/json), and what it says of the messages is what
// messagesOK says of the value it split.
func FuzzSplitChat(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"messages":[{"role":"user"}],"messages":[{"Role":"user"}]}`))
	f.Add([]byte(`{"messages":[{"Role":"user"}],"messages":[{"role":"user"}]}`))
	f.Add([]byte(`{"messages":[{"role":"\u0000"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fields, msgsOK, ok := splitChat(body, false)
		if !ok {
			return
		}
		raw, present := fields["messages"]
		if want := present && messagesOK(raw); msgsOK != want {
			t.Fatalf("%q: splitChat says the messages pass %v, messagesOK(%q) %v", body, msgsOK, raw, want)
		}
	})
}

// FuzzCheckedChatRequest: on a body encoding/json accepts (as the
// fingerprint's parser does, and more), the decoder that only searches
// strings for their end decodes what the one that checks them decodes.
func FuzzCheckedChatRequest(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"a \\\" b \\\\\\"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"\\u00e9\\n\\\\"}],"tools":[{"x":"\\""}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"bad \\q"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checked, errChecked := DecodeCheckedChatRequest(body)
		if !json.Valid(body) || CheckUnique(body) != nil {
			return // the fingerprint refuses it, whatever this said
		}
		full, errFull := DecodeChatRequest(body)
		if (errFull == nil) != (errChecked == nil) || (errFull != nil && errFull.Error() != errChecked.Error()) {
			t.Fatalf("%q: checked decoder %v, full %v", body, errChecked, errFull)
		}
		if errFull == nil && !reflect.DeepEqual(full.fields, checked.fields) {
			t.Fatalf("%q: checked decoder split %v, full %v", body, checked.fields, full.fields)
		}
	})
}

// TestQuoteEnd: on a well-formed string, quoteEnd finds stringEnd's end
// and escape report.
func TestQuoteEnd(t *testing.T) {
	for _, s := range []string{`"`, `a"`, `\\"`, `\\\""`, `x\\\\"y`, `\\u00e9\\n\\\\\\""`, `é"`, `\\/"`} {
		b := []byte(s + `,"next"`)
		e1, esc1, ok1 := stringEnd(b, 0)
		e2, esc2, ok2 := quoteEnd(b, 0)
		if !ok1 || e1 != e2 || esc1 != esc2 || ok1 != ok2 {
			t.Errorf("%s: stringEnd %d %v %v, quoteEnd %d %v %v", s, e1, esc1, ok1, e2, esc2, ok2)
		}
	}
	if _, _, ok := quoteEnd([]byte(`abc\"`), 0); ok {
		t.Error("an escaped last quote ends the string")
	}
}

// splitChat is splitObject for a Chat Completions body, which also checks
// the "messages" value as messagesOK does while it splits, so that a large
// body is scanned once: msgsOK is messagesOK(fields["messages"]) (false
// when there is no such field). ok is splitObject's.
// BenchmarkDecodeChatRequest keeps it: a third of jsontext's time.
// quotesOnly: see scanner.
func splitChat(body []byte, quotesOnly bool) (fields map[string]json.RawMessage, msgsOK, ok bool) {
	return splitChatFrom(body, quotesOnly, parallelMessages)
}

// splitChatFrom is splitChat with the messages of a body of split bytes or
// more checked on two goroutines (0: never).
func splitChatFrom(body []byte, quotesOnly bool, split int) (fields map[string]json.RawMessage, msgsOK, ok bool) {
	s := scanner{b: body, quotesOnly: quotesOnly, split: split}
	return s.splitChat()
}
