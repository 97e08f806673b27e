package httpapi

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// readAll returns what io.ReadAll returns, whatever the body's length
// (around the chunk size, and with the length announced short or long),
// and however its reader cuts it up.
func TestReadAll(t *testing.T) {
	for _, size := range []int{0, 1, 100, readChunk - 1, readChunk, readChunk + 1, 3*readChunk + 7, 1 << 20} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i*7 + i/251)
		}
		for _, n := range []int64{int64(size), -1, int64(size) / 2, int64(size) * 2} {
			for name, r := range map[string]func() io.Reader{
				"whole":    func() io.Reader { return bytes.NewReader(body) },
				"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) },
				"halves":   func() io.Reader { return iotest.HalfReader(bytes.NewReader(body)) },
				"data EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) },
			} {
				if name == "one byte" && size > 3*readChunk {
					continue
				}
				got, err := readAll(r(), n)
				if err != nil || !bytes.Equal(got, body) {
					t.Errorf("size %d, announced %d, %s: %d bytes, %v", size, n, name, len(got), err)
				}
			}
		}
	}
}

func TestReadAllError(t *testing.T) {
	boom := errors.New("boom")
	for _, size := range []int{10, readChunk + 10, 3 * readChunk} {
		r := io.MultiReader(bytes.NewReader(make([]byte, size)), iotest.ErrReader(boom))
		if _, err := readAll(r, int64(size)+5); !errors.Is(err, boom) {
			t.Errorf("size %d: error %v, want %v", size, err, boom)
		}
	}
}
