package chat

import (
	"encoding/json"
	"testing"
)

func TestRefusalText(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`"I can't help with that."`, "I can't help with that.", true},
		{`""`, "", true},
		{`"a\nb\u00e9"`, "a\nbé", true},
		{``, "", false}, // left out, as vLLM does
		{`null`, "", false},
		{`1`, "", false},
		{`"unterminated`, "", false},
	} {
		m := Message{Refusal: json.RawMessage(tt.raw)}
		if got, ok := m.RefusalText(); got != tt.want || ok != tt.ok {
			t.Errorf("RefusalText of %q = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
		}
	}
}
