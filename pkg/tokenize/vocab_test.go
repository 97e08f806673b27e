//go:build integration

package tokenize

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// vocabDir is the directory `make tools` fills with the tiktoken npm
// package's vocabularies (.tools/tokenizer, or BUZZGATE_TOKENIZER_DIR).
func vocabDir(t testing.TB) string {
	t.Helper()
	const missing = "the tokenizer's vocabularies are not installed: run `make tools` (make test installs them)"
	dir, err := proc.Tool(DirEnv, filepath.Join(".tools", "tokenizer"), missing)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, O200K+".json"))
	}
	if err != nil {
		t.Fatalf("%s (%v)", missing, err)
	}
	return dir
}

// refTexts and their counts by the tiktoken npm package 1.0.22
// (encode_ordinary), the reference implementation's WASM build.
var refTexts = []string{
	"hello world",
	"Hello, world! How are you today?",
	"  leading and trailing  \n\n",
	"func main() {\n\tfmt.Println(\"héllo\")\n}\n",
	"日本語のテキストとemoji 🚀🔥",
	"12345678901234567890",
	"I'm sure they'll've done it; we're",
	"<|endoftext|> is just text here",
	"a\u0301 combining",
	"tab\there\r\nwindows",
}

var refCounts = map[string][]int{
	O200K:  {2, 9, 5, 11, 11, 7, 8, 11, 3, 5},
	CL100K: {2, 9, 5, 12, 16, 7, 11, 11, 3, 5},
}

func TestCountMatchesTiktoken(t *testing.T) {
	c := New(vocabDir(t), nil)
	for enc, model := range map[string]string{O200K: "gpt-4o", CL100K: "gpt-4"} {
		for i, text := range refTexts {
			if n, exact := c.Count(model, text); n != refCounts[enc][i] || !exact {
				t.Errorf("%s %q: %d tokens (exact %v), tiktoken counts %d", enc, text, n, exact, refCounts[enc][i])
			}
		}
	}
}

// TestCountLongText: past ExactLimit the count is extrapolated from the
// first ExactLimit bytes, cut on a character's boundary.
func TestCountLongText(t *testing.T) {
	c := New(vocabDir(t), nil)
	unit := "日本語のテキストとemoji 🚀🔥 " // 49 bytes, multi-byte characters across the cut
	text := strings.Repeat(unit, 3*ExactLimit/len(unit))
	whole, _ := c.Count("gpt-4o", text[:ExactLimit-ExactLimit%len(unit)])
	n, exact := c.Count("gpt-4o", text)
	if !exact || n < 3*whole-30 || n > 3*whole+30 {
		t.Errorf("%d bytes: %d tokens (exact %v); its first third counts %d", len(text), n, exact, whole)
	}
}

// TestCountConcurrent: the first counts race to load the vocabulary.
func TestCountConcurrent(t *testing.T) {
	c := New(vocabDir(t), nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if n, _ := c.Count("gpt-4o", refTexts[1]); n != 9 {
				t.Errorf("%d tokens, want 9", n)
			}
		})
	}
	wg.Wait()
}

func BenchmarkCount(b *testing.B) {
	c := New(vocabDir(b), nil)
	text := strings.Repeat("The gateway bills a dropped stream from a real token count. ", 1000)
	c.Count("gpt-4o", "warm")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		c.Count("gpt-4o", text)
	}
}

func BenchmarkLoad(b *testing.B) {
	dir := vocabDir(b)
	for b.Loop() {
		New(dir, nil).Count("gpt-4o", "warm")
	}
}

// promptBodies are a request of each client API with what Prompt counts of
// it: PerMessage for each message, Priming, and the pieces' counts by the
// tiktoken npm package (o200k_base).
var promptBodies = []struct {
	name, body string
	want       int
}{
	{"chat", `{"model":"gpt-4o","stream":true,"max_tokens":50,
		"messages":[{"role":"system","content":"You are terse."},
			{"role":"user","content":[{"type":"text","text":"What is in this picture?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("QUFB", 10000) + `","detail":"low"}}]}],
		"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}`,
		// 2 messages, priming; system 1, "You are terse." 4, user 1, the
		// question 6; get_weather 2, its description 5, its schema 19.
		2*PerMessage + Priming + 1 + 4 + 1 + 6 + 2 + 5 + 19},
	{"messages", `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.",
		"messages":[{"role":"user","content":"hello world"},
			{"role":"assistant","content":[{"type":"text","text":"call me"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Paris","cache_control":{"type":"ephemeral"}}]}],
		"thinking":{"type":"enabled","budget_tokens":2000},"metadata":{"user_id":"u-123"}}`,
		// 3 messages and the system prompt, priming; "Be brief." 3; user 1, hello world 2;
		// assistant 1, call me 2, get_weather 2, {"city":"Paris"} 5; user 1,
		// Paris 1.
		4*PerMessage + Priming + 3 + 1 + 2 + 1 + 2 + 2 + 5 + 1 + 1},
	{"responses", `{"model":"gpt-5","instructions":"Be brief.","store":false,"reasoning":{"effort":"high"},
		"input":[{"role":"user","content":[{"type":"input_text","text":"hello world"}]},
			{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
			{"type":"function_call_output","call_id":"c1","output":"Paris"},
			{"type":"reasoning","id":"rs_1","encrypted_content":"` + strings.Repeat("gAAAA", 1000) + `"}]}`,
		// 4 items and the instructions, priming; instructions 3; user 1, hello world 2;
		// get_weather 2, its arguments 5; Paris 1.
		5*PerMessage + Priming + 3 + 1 + 2 + 2 + 5 + 1},
}

func TestPromptMatchesTiktoken(t *testing.T) {
	c := New(vocabDir(t), nil)
	for _, b := range promptBodies {
		if n, exact := c.Prompt("gpt-4o", []byte(b.body)); n != b.want || !exact {
			t.Errorf("%s: %d tokens (exact %v), want %d", b.name, n, exact, b.want)
		}
	}
}

// TestPromptLong: a prompt over ExactLimit bytes of text is counted
// within a token a message of its count in whole, the same every time.
func TestPromptLong(t *testing.T) {
	c := New(vocabDir(t), nil)
	var msgs []string
	for i := range 400 {
		msgs = append(msgs, `{"role":"user","content":"`+strings.Repeat("The quick brown fox jumps over the lazy dog. ", 30)+strconv.Itoa(i)+`"}`)
	}
	body := `{"model":"gpt-4o","messages":[` + strings.Join(msgs, ",") + `]}`
	n, exact := c.Prompt("gpt-4o", []byte(body))
	// Each message: PerMessage, "user" 1, 30 sentences of 10 tokens, the
	// last sentence's space (a token of its own before a digit) and the
	// number (1 token): 122,403 counted whole.
	want := 400*(PerMessage+1+300+1+1) + Priming
	if !exact || n < want-400 || n > want+400 {
		t.Errorf("%d bytes: %d tokens (exact %v), want about %d", len(body), n, exact, want)
	}
	if again, _ := c.Prompt("gpt-4o", []byte(body)); again != n {
		t.Errorf("counted %d, then %d", n, again)
	}
}
