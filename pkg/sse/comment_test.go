package sse

import "io"

// WriteComment writes a comment, which readers ignore, as an upstream's
// keep-alive is: the tests' source of comments. Line
// breaks in text become separate comment lines.
func WriteComment(w io.Writer, text string) error {
	if text == "" {
		_, err := io.WriteString(w, ":\n\n")
		return err
	}
	return write(w, ": ", []byte(text))
}
