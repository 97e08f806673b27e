package clientapi

import (
	"bytes"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

func TestMayRefer(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"messages":[{"content":"hi"}]}`, false},
		{`{"messages":[{"content":"a file_id"}]}`, false},
		{`{"messages":[{"content":"the \"file_id\" key"}]}`, false},
		{`{"messages":[{"file":{"file_id":"x"}}]}`, true},
		{`{"messages":[{"content":"caf\u00e9 \u003cb\u003e \u4e2d"}]}`, false},
		{`{"messages":[{"file":{"\u0066ile_id":"x"}}]}`, true},
		{`{"messages":[{"file":{"fil\u0065\u005Fid":"x"}}]}`, true},
		{`{"x":"\u00`, false},
		{`{"x":"\u00zz"}`, false},
		{`{"x":"a\\u0066ile_id"}`, false},
		{`{"x":"a\\\u0066"}`, true},
		{`{"x":"\n\"\\\\","\u005f":1}`, true},
		{`{"x":"\t"}\`, false},
	} {
		if got := MayRefer([]byte(tc.body), `"file_id"`); got != tc.want {
			t.Errorf("MayRefer(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// Several words are looked for at once: any of them, wherever it is (the
// body's first or last bytes, overlapping another word's quotes), and a
// word that is no JSON string on its own.
func TestMayReferWords(t *testing.T) {
	words := []string{`"file_id"`, `"item_reference"`, `"prompt"`, `"prompt_cache_key"`}
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`"prompt"`, true},
		{`{"prompt_cache_key":"k"}`, true},
		{`{"prompt_cache":"k"}`, false},
		{`{"x":"prompt"}`, true},
		{`{"x":"a""prompt"}`, true},
		{`{"type":"item_reference","id":"i"}`, true},
		{`{"x":"item_referenc"}`, false},
		{`{"x":"\"prompt\""}`, false},
		{`{"x":"promp`, false},
		{`{"x":"`, false},
		{`"`, false},
		{``, false},
		{`{"x":"file_id`, false},
	} {
		if got := MayRefer([]byte(tc.body), words...); got != tc.want {
			t.Errorf("MayRefer(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
	if !MayRefer([]byte(`{"x":"a file_id b"}`), "file_id") || MayRefer([]byte(`{"x":"a file b"}`), "file_id") {
		t.Error("a word without quotes is not looked for as written")
	}
}

// FuzzMayRefer: the walk over the quotes finds a word exactly when a
// search for each word does.
func FuzzMayRefer(f *testing.F) {
	for _, s := range []string{`{"file_id":"x"}`, `"audio"`, `""audio"`, `{"x":"\"audio\""}`, `"file_i`, `\u0061`} {
		f.Add([]byte(s))
	}
	words := []string{`"file_id"`, `"audio"`, `"a"`, `"audio_x"`}
	f.Fuzz(func(t *testing.T, body []byte) {
		want := letterEscape(body)
		for _, w := range words {
			want = want || bytes.Contains(body, []byte(w))
		}
		if got := MayRefer(body, words...); got != want {
			t.Fatalf("MayRefer(%q) = %v, want %v", body, got, want)
		}
	})
}

// BenchmarkMayRefer is the screen on a coding agent's 1 MB Chat
// Completions body, which refers to no provider object: every word and
// every escape is looked at.
func BenchmarkMayRefer(b *testing.B) {
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if MayRefer(body, `"file_id"`, `"audio"`) {
			b.Fatal("the body refers to a provider object")
		}
	}
}

// BenchmarkMayReferResponses is the Responses API's screen, six words, on
// the same body.
func BenchmarkMayReferResponses(b *testing.B) {
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if MayRefer(body, `"file_id"`, `"item_reference"`, `"conversation"`, `"prompt"`, `"vector_store_ids"`, `"container"`) {
			b.Fatal("the body refers to a provider object")
		}
	}
}

// FuzzLetterEscape: the search by "00" finds a letter's \u escape exactly
// when a walk over every backslash, each escaping the byte after it, does.
func FuzzLetterEscape(f *testing.F) {
	for _, s := range []string{`\u0066`, `\\u0066`, `\\\u005f`, `a\n\u00e9\u0061`, `00\u00`, `\u00zz`, `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want := false
		for j := 0; j < len(body); j++ {
			if body[j] != '\\' {
				continue
			}
			if j+6 <= len(body) && body[j+1] == 'u' && body[j+2] == '0' && body[j+3] == '0' {
				if c, ok := hexByte(body[j+4], body[j+5]); ok && (c >= 'a' && c <= 'z' || c == '_') {
					want = true
					break
				}
			}
			j++ // the escaped byte
		}
		if got := letterEscape(body); got != want {
			t.Fatalf("letterEscape(%q) = %v, want %v", body, got, want)
		}
	})
}
