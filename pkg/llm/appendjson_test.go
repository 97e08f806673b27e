package llm

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendCompletion checks the hand-written chat.completion encoder
// against encoding/json on answers built from fuzzed text.
func FuzzAppendCompletion(f *testing.F) {
	f.Add("Hello <b>&</b> \"w\"\n\t\b\f\x01\u2028\u2029é😀", "", "get", `{"a":1}`, "call_1", "fp", uint8(0), uint8(3))
	f.Add("", "I can't \xff\xfe", "", "", "", "", uint8(2), uint8(0))
	f.Add("x", "", "f", "", "", "", uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, content, refusal, name, args, id, fp string, index, mode uint8) {
		var a Assembler
		str := func(s string) *string { return &s }
		d := deltaWire{ID: id, Model: content, Created: int64(index) * 1e9, SystemFingerprint: fp, ServiceTier: refusal}
		ch := deltaChoiceWire{Index: int(index % 4)}
		if mode&1 != 0 {
			ch.Delta.Content = str(content)
		}
		if mode&2 != 0 {
			ch.Delta.ToolCalls = []deltaToolCallWire{{Index: int(index % 3), ID: id, Type: name, Function: FunctionCall{Name: name, Arguments: args}}}
		}
		if mode&4 != 0 {
			ch.Delta.Refusal = str(refusal)
		}
		if mode&8 != 0 {
			ch.Delta.FunctionCall = &FunctionCall{Name: name, Arguments: args}
		}
		if mode&16 != 0 {
			ch.Logprobs = &deltaLogprobsWire{Content: []json.RawMessage{json.RawMessage(`{"token":"a"}`)}}
		}
		if mode&32 != 0 {
			ch.FinishReason = str(fp)
		}
		if mode&64 == 0 {
			d.Choices = []deltaChoiceWire{ch}
		}
		a.add(&d)
		override := ""
		if mode&128 != 0 {
			override = "incomplete"
		}
		usage := Usage{PromptTokens: int(index), CompletionTokens: 2, TotalTokens: 3, Cost: 1e-7, Extra: map[string]json.RawMessage{"x<": json.RawMessage(`{"a": "<&>"}`)}}
		out, err := a.completion(usage, override)
		if err != nil {
			t.Skip()
		}
		want, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		got := appendCompletion(nil, out)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendCompletion differs:\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkCompletion(b *testing.B) {
	var a Assembler
	for _, c := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"Buzzgate is a gateway that sends each request to the first provider that answers "},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"and reports the cost of every answer it gives back to its client, byte for byte."},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	} {
		if err := a.Add([]byte(c)); err != nil {
			b.Fatal(err)
		}
	}
	u := Usage{PromptTokens: 12, CompletionTokens: 40, TotalTokens: 52, Cost: 0.000092}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Completion(u, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := a.completion(u, "")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// referenceUsage is Usage as encoding/json would encode it (its cost a
// USD), built from encoding/json's pieces only: json.Marshal of a Usage would call
// Usage.MarshalJSON, the encoder under test, and compare it with itself.
type referenceUsage Usage

func (u referenceUsage) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	num := func(v any) error {
		x, err := json.Marshal(v)
		b.Write(x)
		return err
	}
	b.WriteString(`{"prompt_tokens":`)
	num(u.PromptTokens)
	b.WriteString(`,"completion_tokens":`)
	num(u.CompletionTokens)
	b.WriteString(`,"total_tokens":`)
	num(u.TotalTokens)
	b.WriteString(`,"cost":`)
	if err := num(USD(u.Cost)); err != nil {
		return nil, err
	}
	if u.Estimated {
		b.WriteString(`,"estimated":true`)
	}
	if len(u.Extra) > 0 {
		extra, err := json.Marshal(u.Extra)
		if err != nil {
			return nil, err
		}
		if len(extra) > 2 {
			b.WriteByte(',')
			b.Write(extra[1 : len(extra)-1])
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// FuzzUsageJSON checks Usage's encoder against the encoding/json-built
// reference (referenceUsage), as json.Marshal puts it out.
func FuzzUsageJSON(f *testing.F) {
	f.Add(10, 2, 12, 0.0000075, false, "x", `{"a":"<&>"}`)
	f.Add(0, 0, 0, 1e-7, true, "", "")
	f.Add(1, 2, 3, 1e21, false, "k", `[1, 2]`)
	f.Add(1, 2, 3, -1e-9, false, "k", `"\u2028"`)
	f.Add(-5, 1<<40, 3, 9.2e-5, true, "a<>&\u2028", ` { "x" : "<\u2029" } `)
	f.Add(1, 2, 3, 3e21, false, "", "")
	f.Add(1, 2, 3, 1e-6, false, "", "")
	f.Add(1, 2, 3, 9.99e-7, false, "", "")
	f.Fuzz(func(t *testing.T, p, c, tot int, cost float64, est bool, key, extra string) {
		u := Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: tot, Cost: cost, Estimated: est}
		if key != "" && json.Valid([]byte(extra)) {
			u.Extra = map[string]json.RawMessage{key: json.RawMessage(extra)}
		}
		want, wantErr := json.Marshal(referenceUsage(u))
		got, err := u.appendJSON(nil)
		if (err != nil) != (wantErr != nil) || (err == nil && !bytes.Equal(got, want)) {
			t.Fatalf("appendJSON = %s, %v; json.Marshal = %s, %v", got, err, want, wantErr)
		}
	})
}
