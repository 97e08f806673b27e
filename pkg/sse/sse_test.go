package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// readAll reads events until an error and returns both.
func readAll(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func data(s string) Event { return Event{Data: []byte(s)} }

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    []Event
		wantErr error
	}{
		{name: "empty", in: "", wantErr: io.EOF},
		{name: "one event", in: "data: hello\n\n", want: []Event{data("hello")}, wantErr: io.EOF},
		{name: "no space after colon", in: "data:hello\n\n", want: []Event{data("hello")}, wantErr: io.EOF},
		{name: "only one space stripped", in: "data:  two\n\n", want: []Event{data(" two")}, wantErr: io.EOF},
		{name: "tab is not stripped", in: "data:\tx\n\n", want: []Event{data("\tx")}, wantErr: io.EOF},
		{name: "CRLF", in: "data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", want: []Event{data("a\nb"), data("c")}, wantErr: io.EOF},
		{name: "CR", in: "data: a\rdata: b\r\rdata: c\r\r", want: []Event{data("a\nb"), data("c")}, wantErr: io.EOF},
		{name: "mixed line ends", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []Event{data("a\nb\nc")}, wantErr: io.EOF},
		{name: "LF CR is two line ends", in: "data: a\n\rdata: b\n\n", want: []Event{data("a"), data("b")}, wantErr: io.EOF},
		{name: "multi-line data", in: "data: one\ndata: two\ndata: three\n\n", want: []Event{data("one\ntwo\nthree")}, wantErr: io.EOF},
		{name: "data ending in empty line", in: "data: a\ndata:\n\n", want: []Event{data("a\n")}, wantErr: io.EOF},
		{name: "empty data field dispatches", in: "data:\n\n", want: []Event{data("")}, wantErr: io.EOF},
		{name: "data field without colon", in: "data\n\n", want: []Event{data("")}, wantErr: io.EOF},
		{name: "empty data with space", in: "data: \n\n", want: []Event{data("")}, wantErr: io.EOF},
		{name: "comments ignored", in: ": keep-alive\n:\ndata: x\n: inside\n\n: after\n\n", want: []Event{data("x")}, wantErr: io.EOF},
		{name: "OpenRouter processing comment", in: ": OPENROUTER PROCESSING\n\ndata: {}\n\n", want: []Event{data("{}")}, wantErr: io.EOF},
		{name: "event without data not dispatched", in: "event: ping\n\ndata: x\n\n", want: []Event{data("x")}, wantErr: io.EOF},
		{name: "event type", in: "event: error\ndata: {}\n\ndata: y\n\n", want: []Event{{Event: "error", Data: []byte("{}")}, data("y")}, wantErr: io.EOF},
		{
			name:    "id persists",
			in:      "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
			want:    []Event{{ID: "1", Data: []byte("a")}, {ID: "1", Data: []byte("b")}, data("c")},
			wantErr: io.EOF,
		},
		{name: "id with NUL ignored", in: "id: 7\n\nid: a\x00b\ndata: x\n\n", want: []Event{{ID: "7", Data: []byte("x")}}, wantErr: io.EOF},
		{name: "retry and unknown fields ignored", in: "retry: 1000\nfoo: bar\nDATA: no\ndata: yes\n\n", want: []Event{data("yes")}, wantErr: io.EOF},
		{name: "field name is case sensitive", in: "Data: x\n\n", wantErr: io.EOF},
		{name: "colon in value", in: "data: a: b\n\n", want: []Event{data("a: b")}, wantErr: io.EOF},
		{name: "no trailing blank line at EOF", in: "data: a\n\ndata: b\n", want: []Event{data("a")}, wantErr: io.EOF},
		{name: "no line end at EOF", in: "data: a\n\ndata: b", want: []Event{data("a")}, wantErr: io.EOF},
		{name: "CR at EOF", in: "data: a\r\r", want: []Event{data("a")}, wantErr: io.EOF},
		{name: "byte order mark", in: "\xEF\xBB\xBFdata: a\n\n", want: []Event{data("a")}, wantErr: io.EOF},
		{name: "byte order mark only first", in: "data: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []Event{data("a")}, wantErr: io.EOF},
		{name: "binary data", in: "data: \x00\xff\xfe\n\n", want: []Event{data("\x00\xff\xfe")}, wantErr: io.EOF},
		{name: "data at limit", in: "data: 12345\n\n", max: 5, want: []Event{data("12345")}, wantErr: io.EOF},
		{name: "data over limit", in: "data: a\n\ndata: 123456\n\ndata: b\n\n", max: 5, want: []Event{data("a")}, wantErr: ErrEventTooLarge},
		{name: "lines over limit together", in: "data: 123\ndata: 45\n\n", max: 5, wantErr: ErrEventTooLarge},
		{name: "lines at limit together", in: "data: 12\ndata: 45\n\n", max: 5, want: []Event{data("12\n45")}, wantErr: io.EOF},
		{name: "comment line over limit", in: ":" + strings.Repeat("x", 100) + "\n\n", max: 5, wantErr: ErrEventTooLarge},
		{name: "long line over buffer", in: "data: " + strings.Repeat("y", 3*bufferSize) + "\n\n", want: []Event{data(strings.Repeat("y", 3*bufferSize))}, wantErr: io.EOF},
		{name: "long line over limit", in: "data: " + strings.Repeat("y", 3*bufferSize) + "\n\n", max: bufferSize, wantErr: ErrEventTooLarge},
	}
	for _, tt := range tests {
		for _, mode := range []string{"whole", "one byte", "half"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				var src io.Reader = strings.NewReader(tt.in)
				switch mode {
				case "one byte":
					src = iotest.OneByteReader(src)
				case "half":
					src = iotest.HalfReader(src)
				}
				got, err := readAll(NewReader(src, tt.max))
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if err != tt.wantErr {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
			})
		}
	}
}

// errAfter yields s, then err.
type errAfter struct {
	s   string
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.s == "" {
		return 0, e.err
	}
	n := copy(p, e.s)
	e.s = e.s[n:]
	return n, nil
}

func TestReaderErrorsUnchanged(t *testing.T) {
	netErr := errors.New("read tcp: connection reset by peer")
	for _, want := range []error{io.EOF, io.ErrUnexpectedEOF, netErr} {
		t.Run(want.Error(), func(t *testing.T) {
			r := NewReader(&errAfter{s: "data: a\n\ndata: partial\n", err: want}, 0)
			got, err := readAll(r)
			if diff := cmp.Diff([]Event{data("a")}, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if err != want {
				t.Errorf("error = %v, want %v unchanged", err, want)
			}
			// Sticky, even though the source would now report EOF.
			if _, err := r.Next(); err != want {
				t.Errorf("second Next error = %v, want %v", err, want)
			}
		})
	}
}

func TestReaderErrorAlongsideData(t *testing.T) {
	// A source that returns its last bytes together with the error.
	r := NewReader(iotest.DataErrReader(strings.NewReader("data: a\n\ndata: b\n\n")), 0)
	got, err := readAll(r)
	if diff := cmp.Diff([]Event{data("a"), data("b")}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if err != io.EOF {
		t.Errorf("error = %v, want io.EOF", err)
	}
}

func TestReaderStickyTooLarge(t *testing.T) {
	r := NewReader(strings.NewReader("data: 1234567890\n\ndata: ok\n\n"), 4)
	for range 2 {
		if _, err := r.Next(); err != ErrEventTooLarge {
			t.Fatalf("Next error = %v, want ErrEventTooLarge", err)
		}
	}
}

func TestReaderDataIsFresh(t *testing.T) {
	in := "data: first\n\ndata: second\ndata: line\n\ndata: third\n\n"
	r := NewReader(iotest.HalfReader(strings.NewReader(in)), 0)
	evs, err := readAll(r)
	if err != io.EOF {
		t.Fatalf("error = %v", err)
	}
	want := []Event{data("first"), data("second\nline"), data("third")}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events kept across Next calls changed (-want +got):\n%s", diff)
	}
}

// TestReaderDoesNotWaitAfterCR checks that a stream using bare '\r' line ends
// dispatches an event as soon as its blank line arrives, without reading on
// to learn whether a '\n' follows.
func TestReaderDoesNotWaitAfterCR(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() {
		pw.Write([]byte("data: a\r"))
		pw.Write([]byte("\r"))
		// No more writes until the reader has the event.
	}()
	r := NewReader(pr, 0)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next = %q, %v; want \"a\"", ev.Data, err)
	}
	pw.Close()
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next after close = %v, want io.EOF", err)
	}
}

func TestWriteData(t *testing.T) {
	tests := []struct {
		data string
		want string
	}{
		{"", "data: \n\n"},
		{"hello", "data: hello\n\n"},
		{" lead", "data:  lead\n\n"},
		{"a\nb", "data: a\ndata: b\n\n"},
		{"a\r\nb", "data: a\ndata: b\n\n"},
		{"a\rb", "data: a\ndata: b\n\n"},
		{"a\n", "data: a\ndata: \n\n"},
		{"\n\r", "data: \ndata: \ndata: \n\n"},
		{"[DONE]", "data: [DONE]\n\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := WriteData(&b, []byte(tt.data)); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != tt.want {
			t.Errorf("WriteData(%q) wrote %q, want %q", tt.data, got, tt.want)
		}
	}
}

func TestWriteComment(t *testing.T) {
	tests := []struct{ text, want string }{
		{"", ":\n\n"},
		{"keep-alive", ": keep-alive\n\n"},
		{"a\ndata: injected", ": a\n: data: injected\n\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := WriteComment(&b, tt.text); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != tt.want {
			t.Errorf("WriteComment(%q) wrote %q, want %q", tt.text, got, tt.want)
		}
	}
}

// countingWriter counts Write calls.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestWriteDataSingleWrite(t *testing.T) {
	var w countingWriter
	if err := WriteData(&w, []byte("a\nb\nc")); err != nil {
		t.Fatal(err)
	}
	if w.writes != 1 {
		t.Errorf("WriteData made %d writes, want 1", w.writes)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

func TestWriteError(t *testing.T) {
	want := errors.New("broken pipe")
	if err := WriteData(errWriter{want}, []byte("x")); err != want {
		t.Errorf("WriteData error = %v, want %v", err, want)
	}
	if err := WriteComment(errWriter{want}, ""); err != want {
		t.Errorf("WriteComment error = %v, want %v", err, want)
	}
}

func TestRoundTrip(t *testing.T) {
	payloads := []string{
		`{"id":"c1","choices":[{"delta":{"content":"Hi"}}]}`,
		"",
		"multi\nline\r\ntext\rend",
		"trailing newline\n",
		": looks like a comment",
		"data: looks like a field",
		"\n\n\n",
		strings.Repeat("z", 2*bufferSize),
		"[DONE]",
	}
	var b bytes.Buffer
	for i, p := range payloads {
		if err := WriteData(&b, []byte(p)); err != nil {
			t.Fatal(err)
		}
		if err := WriteComment(&b, fmt.Sprintf("keep-alive %d\nsecond line", i)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readAll(NewReader(&b, 0))
	if err != io.EOF {
		t.Fatalf("error = %v, want io.EOF", err)
	}
	var want []Event
	for _, p := range payloads {
		want = append(want, Event{Data: normalizeLineEnds([]byte(p))})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// normalizeLineEnds is what a Reader gives back for data that WriteData
// wrote: every "\r\n" and every bare "\r" becomes "\n", since the event
// stream format does not distinguish line endings. Every other byte, invalid
// UTF-8 and NUL included, round-trips exactly.
func normalizeLineEnds(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	b = bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
	if b == nil {
		b = []byte{} // Reader never returns nil Data
	}
	return b
}

// referenceParse is a direct, slow transcription of the WHATWG algorithm
// ("Interpreting an event stream"), used to check Reader in FuzzReader. It
// ignores size limits.
func referenceParse(in string) []Event {
	in = strings.TrimPrefix(in, "\uFEFF")
	var lines []string
	for {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // an unterminated last line is discarded at EOF
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	var (
		evs                  []Event
		dataBuf, typ, lastID string
		hasData              bool
	)
	for _, line := range lines {
		if line == "" {
			if hasData {
				evs = append(evs, Event{Event: typ, ID: lastID, Data: []byte(strings.TrimSuffix(dataBuf, "\n"))})
			}
			dataBuf, typ, hasData = "", "", false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ = value
		case "data":
			dataBuf += value + "\n"
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		}
	}
	return evs
}

// chunkedReader returns its input in pieces of the given sizes, cycling, so
// that fuzzing explores every place a read can split a line.
type chunkedReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)]) + 1
		c.i++
	}
	n = min(n, len(p), len(c.data))
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func FuzzReader(f *testing.F) {
	seeds := []string{
		"data: hello\n\n",
		"data: a\r\ndata: b\r\n\r\n",
		"data: a\rdata: b\r\r",
		": comment\nevent: x\nid: 1\ndata\n\n",
		"\xEF\xBB\xBFdata: x\n\n",
		"data: a\n\rdata:\n\n",
		"retry: 10\ndata: 1\n\ndata: 2",
		"id: a\x00\ndata: 0\n\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), []byte{0, 3, 1}, uint16(0))
		f.Add([]byte(s), []byte(nil), uint16(3))
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte, limit uint16) {
		want := referenceParse(string(in))
		max := int(limit) // 0: the default, larger than any fuzz input
		r := NewReader(&chunkedReader{data: in, sizes: sizes}, max)
		got, err := readAll(r)
		if err != io.EOF && err != ErrEventTooLarge {
			t.Fatalf("unexpected error %v", err)
		}
		if len(got) > len(want) {
			t.Fatalf("got %d events, reference %d", len(got), len(want))
		}
		if diff := cmp.Diff(want[:len(got)], got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("events differ from the reference (-want +got):\n%s", diff)
		}
		if max <= 0 {
			max = defaultMaxEventBytes
		}
		for _, ev := range got {
			if ev.Data == nil {
				t.Fatal("nil Data")
			}
			if len(ev.Data) > max {
				t.Fatalf("event of %d bytes passed a limit of %d", len(ev.Data), max)
			}
		}
		if err == io.EOF && len(got) != len(want) {
			t.Fatalf("clean EOF after %d of %d events", len(got), len(want))
		}
		if err == ErrEventTooLarge && len(in) <= max {
			t.Fatalf("ErrEventTooLarge for an input of %d bytes with a limit of %d", len(in), max)
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "x", "a\nb", "a\r\nb", "a\rb", "\r", "\r\n", "\n\r", " lead", ": c", "\xEF\xBB\xBF", "\x00"} {
		f.Add([]byte(s), "keep-alive", []byte{1})
	}
	f.Fuzz(func(t *testing.T, payload []byte, comment string, sizes []byte) {
		var b bytes.Buffer
		if err := WriteComment(&b, comment); err != nil {
			t.Fatal(err)
		}
		if err := WriteData(&b, payload); err != nil {
			t.Fatal(err)
		}
		if err := WriteComment(&b, comment); err != nil {
			t.Fatal(err)
		}
		if err := WriteData(&b, []byte("next")); err != nil {
			t.Fatal(err)
		}
		// The tightest limit the stream fits in: the payload's own length
		// (what it reads back as is never longer), unless the comment lines
		// or the second event need more.
		limit := max(len(payload), len(comment), len("next"))
		r := NewReader(&chunkedReader{data: b.Bytes(), sizes: sizes}, limit)
		got, err := readAll(r)
		if err != io.EOF {
			t.Fatalf("error = %v, want io.EOF; stream %q", err, b.Bytes())
		}
		want := []Event{{Data: normalizeLineEnds(payload)}, data("next")}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round trip of %q (-want +got):\n%s", payload, diff)
		}
	})
}

// chatStream is a typical streamed chat answer: a role chunk, 198 content
// chunks and a finish chunk (200 chunks), a usage chunk and [DONE], each event a few hundred
// bytes, as OpenAI sends them.
func chatStream(chunks int) []byte {
	var b bytes.Buffer
	head := `{"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":`
	WriteData(&b, []byte(head+`{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`))
	for i := range chunks - 2 {
		WriteData(&b, fmt.Appendf(nil, `%s{"content":" word%d"},"logprobs":null,"finish_reason":null}]}`, head, i))
	}
	WriteData(&b, []byte(head+`{},"logprobs":null,"finish_reason":"stop"}]}`))
	WriteData(&b, []byte(`{"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":198,"total_tokens":210}}`))
	WriteData(&b, []byte("[DONE]"))
	return b.Bytes()
}

func BenchmarkReader(b *testing.B) {
	stream := chatStream(200)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	src := bytes.NewReader(stream)
	for b.Loop() {
		src.Reset(stream)
		r := NewReader(src, 16<<20)
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
			n++
		}
		if n != 202 {
			b.Fatalf("%d events, want 202", n)
		}
	}
}

func BenchmarkWriteData(b *testing.B) {
	payload := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if err := WriteData(io.Discard, payload); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzNamedRoundTrip: an event written with WriteEvent reads back with its
// name (line breaks in it turned into spaces, "" meaning none) and its data,
// whatever both hold, and nothing in either leaks into the next event.
func FuzzNamedRoundTrip(f *testing.F) {
	for _, s := range []string{"", "message_start", "a\nb", "ping\r", "event: x", ":", "\x00"} {
		f.Add(s, []byte(`{"type":"x"}`), []byte{1})
	}
	f.Fuzz(func(t *testing.T, name string, payload []byte, sizes []byte) {
		var b bytes.Buffer
		if err := WriteEvent(&b, name, payload); err != nil {
			t.Fatal(err)
		}
		if err := WriteEvent(&b, "", []byte("next")); err != nil {
			t.Fatal(err)
		}
		r := NewReader(&chunkedReader{data: b.Bytes(), sizes: sizes}, max(len(payload), len(name)+8, 4))
		got, err := readAll(r)
		if err != io.EOF {
			t.Fatalf("error = %v, want io.EOF; stream %q", err, b.Bytes())
		}
		wantName := strings.NewReplacer("\r", " ", "\n", " ").Replace(name)
		// A reader drops one leading space of a field value (the writer
		// adds one), and takes the field as it is otherwise.
		want := []Event{{Event: wantName, Data: normalizeLineEnds(payload)}, data("next")}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round trip of %q %q (-want +got):\n%s", name, payload, diff)
		}
	})
}

// TestRelease: a released Reader gives its buffer back and reads no more.
func TestRelease(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\n"), 0)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next = %q, %v", ev.Data, err)
	}
	r.Release()
	r.Release()
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next after Release = %v, want io.EOF", err)
	}
	// Another Reader reuses the buffer from the start.
	r2 := NewReader(strings.NewReader("data: c\n\n"), 0)
	if ev, err := r2.Next(); err != nil || string(ev.Data) != "c" {
		t.Fatalf("Next = %q, %v", ev.Data, err)
	}
}
