package tokenize

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncodingFor(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o-mini":            O200K,
		"gpt-4.1-2025-04-14":     O200K,
		"gpt-4.5-preview":        O200K,
		"gpt-5-codex":            O200K,
		"o3-mini":                O200K,
		"claude-sonnet-4-5":      O200K,
		"gpt-4":                  CL100K,
		"gpt-4-turbo":            CL100K,
		"openai/gpt-4-0613":      CL100K,
		"GPT-3.5-Turbo":          CL100K,
		"text-embedding-3-small": CL100K,
		"":                       O200K,
	} {
		if got := EncodingFor(model); got != want {
			t.Errorf("EncodingFor(%q) = %s, want %s", model, got, want)
		}
	}
}

// TestFallback: without vocabularies every count is one token per four
// bytes, reported as not exact, and a file that cannot be read is said
// once in the log.
func TestFallback(t *testing.T) {
	text := strings.Repeat("x", 4001)
	if n, exact := New("", nil).Count("gpt-4o", text); n != 1001 || exact {
		t.Errorf("no directory: %d, exact %v; want 1001, false", n, exact)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, O200K+".json"), []byte(`{"pat_str":"x","bpe_ranks":"! 0 !!!"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := New(dir, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, model := range []string{"gpt-4o", "gpt-5", "gpt-4"} {
		if n, exact := c.Count(model, text); n != 1001 || exact {
			t.Errorf("%s, unreadable vocabulary: %d, exact %v; want 1001, false", model, n, exact)
		}
	}
	if n, exact := c.Count("gpt-4o", ""); n != 0 || !exact {
		t.Errorf("empty text: %d, %v", n, exact)
	}
	// One line for o200k_base (malformed), one for cl100k_base (missing).
	if got := strings.Count(logs.String(), "tokenizer unavailable"); got != 2 {
		t.Errorf("%d log lines, want 2:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "bpe_ranks token") || !strings.Contains(logs.String(), "no such file") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
	for _, n := range []int{0, -1} {
		if Fallback(n) != 0 {
			t.Errorf("Fallback(%d) = %d", n, Fallback(n))
		}
	}
}

// TestPromptFallback: without a vocabulary the prompt's text, not its JSON,
// counts one token per four bytes: an image's data, an identifier or a
// signature adds nothing.
func TestPromptFallback(t *testing.T) {
	c := New("", nil)
	text := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("a", 40) + `"}]}`
	// PerMessage, Priming, and "user" with the 40 bytes: 11 tokens.
	if n, exact := c.Prompt("gpt-4o", []byte(text)); n != PerMessage+Priming+11 || exact {
		t.Errorf("text only: %d (exact %v), want %d", n, exact, PerMessage+Priming+11)
	}
	withImage := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("a", 40) + `"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("QUFB", 5000) + `"}}],"tool_call_id":"call_123456789"}],` +
		`"metadata":{"k":"` + strings.Repeat("v", 400) + `"},"stream":true,"max_tokens":100}`
	if n, _ := c.Prompt("gpt-4o", []byte(withImage)); n != PerMessage+Priming+11 {
		t.Errorf("with an image: %d, want %d", n, PerMessage+Priming+11)
	}
	for _, bad := range []string{"", "[]", "null", `"text"`, "{"} {
		if n, exact := c.Prompt("gpt-4o", []byte(bad)); n != Fallback(len(bad)) || exact {
			t.Errorf("%q: %d (exact %v)", bad, n, exact)
		}
	}
}

// FuzzPrompt: any body counts without a panic, never below zero.
func FuzzPrompt(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"user","content":"hi"}]}`, `{"input":"x","tools":[{"parameters":{"a":[1,{"b":"c"}]}}]}`, `{"input":{"a":1}}`, `[]`} {
		f.Add([]byte(s))
	}
	c := New("", nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		n, _ := c.Prompt("gpt-4o", body)
		if n < 0 {
			t.Fatalf("%d tokens", n)
		}
	})
}

// TestDefaultDir: the environment's directory, else "tokenizer" beside the
// executable when it holds o200k_base (the Lambda package's layout: the
// test binary is copied into such a directory and run again), else none.
func TestDefaultDir(t *testing.T) {
	if os.Getenv("TOKENIZE_PRINT_DEFAULT_DIR") == "1" {
		fmt.Print(DefaultDir(func(string) string { return "" }))
		os.Exit(0)
	}
	if got := DefaultDir(func(k string) string { return map[string]string{DirEnv: "/opt/vocab"}[k] }); got != "/opt/vocab" {
		t.Errorf("with %s: %q", DirEnv, got)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(exe string) string {
		cmd := exec.Command(exe, "-test.run=^TestDefaultDir$")
		cmd.Env = append(os.Environ(), "TOKENIZE_PRINT_DEFAULT_DIR=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", exe, err)
		}
		return string(out)
	}
	dir := t.TempDir()
	copied := filepath.Join(dir, "bootstrap")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := run(copied); got != "" {
		t.Errorf("no tokenizer directory: %q", got)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tokenizer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := run(copied); got != "" {
		t.Errorf("an empty tokenizer directory: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer", O200K+".json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(copied); got != filepath.Join(dir, "tokenizer") {
		t.Errorf("beside the executable: %q, want %q", got, filepath.Join(dir, "tokenizer"))
	}
}
