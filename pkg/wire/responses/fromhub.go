package responses

import (
	"bytes"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// WithStore is the response object obj (and what follows it: a newline)
// with "store" set.
func WithStore(obj []byte, kept bool) []byte {
	v := []byte("false")
	if kept {
		v = []byte("true")
	}
	body := bytes.TrimRight(obj, "\n")
	out, err := llm.SetTopLevel(body, map[string][]byte{"store": v})
	if err != nil {
		return obj
	}
	return append(out, obj[len(body):]...)
}
