package llm

import (
	"strings"
	"testing"
)

// bigAnswerChunks is a chat stream whose one choice is 480 KB of text, of
// a tool call's arguments, or of a legacy function_call's arguments, in
// 60,000 deltas.
func bigAnswerChunks(kind string) [][]byte {
	const deltas, size = 60_000, 8
	head := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	tail := `,"finish_reason":null}]}`
	var out [][]byte
	switch kind {
	case "text":
		for range deltas {
			out = append(out, []byte(head+`{"content":"abcdefg "}`+tail))
		}
	case "tool", "function":
		if kind == "tool" {
			out = append(out, []byte(head+`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":""}}]}`+tail))
		} else {
			out = append(out, []byte(head+`{"role":"assistant","function_call":{"name":"write","arguments":""}}`+tail))
		}
		args := `{"data":"` + strings.Repeat("x", deltas*size-len(`{"data":""}`)) + `"}`
		for i := 0; i < len(args); i += size {
			piece := strings.ReplaceAll(args[i:min(i+size, len(args))], `"`, `\"`)
			if kind == "tool" {
				out = append(out, []byte(head+`{"tool_calls":[{"index":0,"function":{"arguments":"`+piece+`"}}]}`+tail))
			} else {
				out = append(out, []byte(head+`{"function_call":{"arguments":"`+piece+`"}}`+tail))
			}
		}
	}
	return append(out, []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`))
}

// BenchmarkAssembleBigAnswer: a 480 KB answer in 60,000 chunks, parsed
// chunk by chunk (what relaying it as a stream reads of it) and assembled
// into one chat.completion besides.
func BenchmarkAssembleBigAnswer(b *testing.B) {
	for _, kind := range []string{"text", "tool", "function"} {
		raws := bigAnswerChunks(kind)
		b.Run(kind+"/parse", func(b *testing.B) {
			for b.Loop() {
				for _, raw := range raws {
					if _, err := ParseChunk(raw); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(kind+"/assemble", func(b *testing.B) {
			for b.Loop() {
				var a Assembler
				for _, raw := range raws {
					ch, err := ParseChunk(raw)
					if err != nil {
						b.Fatal(err)
					}
					if err := a.AddChunk(&ch); err != nil {
						b.Fatal(err)
					}
				}
				out, err := a.Completion(Usage{}, "")
				if err != nil || len(out) < 480_000 {
					b.Fatalf("%d bytes, %v", len(out), err)
				}
			}
		})
	}
}

// BenchmarkCompletion: a short answer's chat.completion body, built once
// per non-streaming answer by encoding/json.
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
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Completion(u, ""); err != nil {
			b.Fatal(err)
		}
	}
}
