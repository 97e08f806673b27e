package benchbody_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/buzzgate/buzzgate/internal/benchbody"
	"github.com/buzzgate/buzzgate/pkg/canonjson"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

func TestChat(t *testing.T) {
	for _, size := range []int{10 << 10, 200 << 10, 1 << 20} {
		b := benchbody.Chat("m", size, `"max_tokens":128`)
		if len(b) != size {
			t.Errorf("size %d: got %d bytes", size, len(b))
		}
		var v struct {
			Model     string            `json:"model"`
			MaxTokens int               `json:"max_tokens"`
			Tools     []json.RawMessage `json:"tools"`
			Messages  []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if v.Model != "m" || v.MaxTokens != 128 || len(v.Tools) != 4 || len(v.Messages) < 4 {
			t.Errorf("size %d: model %q, max_tokens %d, %d tools, %d messages", size, v.Model, v.MaxTokens, len(v.Tools), len(v.Messages))
		}
		for _, want := range []string{`\n`, `\t`, `\"`, `\\`, `\u001b`, "<", "&&", "é", "你好", "🚀"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("size %d: no %s in the body", size, want)
			}
		}
		if _, err := llm.DecodeChatRequest(b); err != nil {
			t.Errorf("size %d: DecodeChatRequest: %v", size, err)
		}
		if _, err := canonjson.Canonicalize(b); err != nil {
			t.Errorf("size %d: Canonicalize: %v", size, err)
		}
		if !bytes.Equal(b, benchbody.Chat("m", size, `"max_tokens":128`)) {
			t.Errorf("size %d: two calls gave different bodies", size)
		}
	}
	if b := benchbody.Chat("m", 10, ""); !json.Valid(b) {
		t.Errorf("a size below the smallest body: invalid JSON %s", b)
	}
}
