// Package sse reads and writes Server-Sent Events framing (the WHATWG
// "event stream" format): a Reader that parses an upstream's stream into
// events, and writers for the data events and keep-alive comments the gateway
// sends to its own clients.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// ErrEventTooLarge is returned by Reader.Next when an event's data, or a
// single line of the stream, is larger than the Reader's limit. The stream
// cannot be resynchronised after it: every later Next returns it again.
var ErrEventTooLarge = errors.New("sse: event too large")

const (
	// bufferSize is the read buffer of a Reader. Chat chunks are a few
	// hundred bytes, so 16 KiB holds many of them; a longer line is assembled
	// in a separate buffer. It is per open stream, so it stays modest.
	bufferSize = 4096
	// defaultMaxEventBytes applies when NewReader is given no limit.
	defaultMaxEventBytes = 1 << 20
	// lineSlack is how much longer than the event limit one line may be,
	// room for the field name ("data: ") in front of a maximal value.
	lineSlack = 64
)

// Event is one dispatched event. Event is the "event:" field ("" when the
// event had none; a browser would call that "message"), ID the last "id:"
// seen on the stream so far (it carries over to later events, as the
// specification says), Data the "data:" lines joined by "\n".
type Event struct {
	Event string
	ID    string
	Data  []byte
}

// Reader parses an event stream. It is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int

	// Line reading.
	line      []byte // a line longer than what is buffered, assembled
	skipLF    bool   // the last line ended in '\r': a '\n' right after it belongs to it
	started   bool   // the first line was read (and any byte order mark dropped)
	pos       int64  // bytes consumed from br so far
	noLFUntil int64  // the stream holds no '\n' in [pos, noLFUntil): already scanned

	// The event being accumulated.
	data       []byte
	hasData    bool
	event      string
	id         string
	eventCache string // the last event type seen, reused to avoid a string per event

	err error
}

// NewReader returns a Reader of r. maxEventBytes bounds the data of one event
// (and, with a little slack for the field name, the length of any one line),
// so that a misbehaving upstream cannot make the reader buffer without end;
// 0 or less means 1 MiB.
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = defaultMaxEventBytes
	}
	br := readBuffers.Get().(*bufio.Reader)
	br.Reset(r)
	return &Reader{br: br, max: maxEventBytes}
}

// readBuffers keeps the read buffers of finished Readers: one per upstream
// call would be a tenth of the gateway's allocated bytes.
var readBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufferSize) }}

// Release gives the Reader's buffer back for another Reader to use; every
// later Next returns io.EOF (or the error the Reader had already met). Call
// it when the stream is done with (its end marker read), never concurrently
// with Next. A Reader that ends with an error releases its buffer itself.
func (r *Reader) Release() {
	if r.err == nil {
		r.err = io.EOF
	}
	r.release()
}

func (r *Reader) release() {
	if r.br != nil {
		r.br.Reset(nil)
		readBuffers.Put(r.br)
		r.br = nil
	}
}

// Next returns the next event that has data. Comments, events without a data
// line, "retry:" and unknown fields are skipped.
//
// When the underlying reader fails or ends, the event being accumulated (if
// any) is discarded, as the specification says, and the reader's error is
// returned unchanged: io.EOF for a clean end, io.ErrUnexpectedEOF or a network
// error for a broken one, so that the caller can tell them apart. Errors are
// sticky: every later call returns the same error.
//
// Event.Data is a new slice that the caller may keep.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			r.err = err
			r.data, r.hasData, r.event = nil, false, ""
			r.release()
			return Event{}, err
		}
		if len(line) == 0 {
			if !r.hasData {
				r.event = ""
				continue
			}
			ev := Event{Event: r.event, ID: r.id, Data: r.data}
			r.data, r.hasData, r.event = nil, false, ""
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if !r.hasData {
				if len(value) > r.max {
					return Event{}, r.fail(ErrEventTooLarge)
				}
				// Sized to the value: most events have one data line, and
				// then this slice is handed over as Event.Data as it is.
				r.data = make([]byte, len(value))
				copy(r.data, value)
				r.hasData = true
				continue
			}
			if len(r.data)+1+len(value) > r.max {
				return Event{}, r.fail(ErrEventTooLarge)
			}
			r.data = append(r.data, '\n')
			r.data = append(r.data, value...)
		case "event":
			if string(value) != r.eventCache {
				r.eventCache = string(value)
			}
			r.event = r.eventCache
		case "id":
			// An id containing NUL is ignored, as the specification says.
			if bytes.IndexByte(value, 0) < 0 && string(value) != r.id {
				r.id = string(value)
			}
		}
	}
}

// Ready reports whether the next Next can return an event without reading
// from the underlying reader: a whole event with a data line is already
// buffered. A writer relaying events uses it to flush only when no other
// event is at hand, so that a burst of events goes out in one write while
// an event followed by a pause is never held back. It is conservative: it
// may say false when Next would not wait, never true when it would. It
// must not be called concurrently with Next.
func (r *Reader) Ready() bool {
	if r.err != nil || r.br == nil || len(r.line) > 0 || r.skipLF {
		return false
	}
	buf, _ := r.br.Peek(r.br.Buffered())
	hasData := r.hasData
	for len(buf) > 0 {
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			return false // a line not yet terminated
		}
		line := buf[:i]
		if buf[i] == '\r' {
			if i+1 == len(buf) {
				return false // a '\r' that a '\n' may still follow
			}
			if buf[i+1] == '\n' {
				i++
			}
		}
		buf = buf[i+1:]
		switch {
		case len(line) == 0:
			if hasData {
				return true
			}
		case bytes.HasPrefix(line, []byte("data")) && (len(line) == 4 || line[4] == ':'):
			hasData = true
		}
	}
	return false
}

func (r *Reader) fail(err error) error {
	r.err = err
	r.data, r.hasData, r.event = nil, false, ""
	r.release()
	return err
}

// readLine returns the next line without its terminator ("\r\n", "\n" or
// "\r"). The slice is valid until the next call. A line cut off by the end of
// the stream is not returned: the reader's error is.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	assembling := false
	for {
		buf, err := r.buffered()
		if len(buf) == 0 {
			return nil, err
		}
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.consume(1)
				continue
			}
		}
		end, term := r.lineEnd(buf)
		if end < 0 {
			// No terminator buffered: keep what there is and read on.
			if len(r.line)+len(buf) > r.max+lineSlack {
				return nil, r.fail(ErrEventTooLarge)
			}
			r.line = append(r.line, buf...)
			assembling = true
			r.consume(len(buf))
			continue
		}
		line := buf[:end]
		if assembling {
			r.line = append(r.line, line...)
			line = r.line
		}
		if len(line) > r.max+lineSlack {
			return nil, r.fail(ErrEventTooLarge)
		}
		if term == 0 {
			// A '\r' that ends the buffer: whether a '\n' follows is known
			// only at the next read, and waiting for it here could hold an
			// event back on a stream that uses bare '\r'.
			r.skipLF = true
			term = 1
		}
		// Consuming does not move the bytes: line stays valid until the
		// next read from br.
		r.consume(end + term)
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		return line, nil
	}
}

// buffered returns the bytes buffered in br, reading more if there are none.
func (r *Reader) buffered() ([]byte, error) {
	n := r.br.Buffered()
	if n == 0 {
		if _, err := r.br.Peek(1); err != nil {
			return nil, err
		}
		n = r.br.Buffered()
	}
	buf, _ := r.br.Peek(n)
	return buf, nil
}

func (r *Reader) consume(n int) {
	r.br.Discard(n) //nolint:errcheck // n bytes are buffered: it cannot fail
	r.pos += int64(n)
}

// lineEnd finds the first line terminator in buf, which starts at r.pos. It
// returns the terminator's index and length, 0 for a '\r' at the end of buf,
// or -1 when buf holds none. It remembers how far buf holds no '\n', so that
// a stream of bare '\r' line ends is not scanned again and again.
func (r *Reader) lineEnd(buf []byte) (end, term int) {
	from := 0
	if r.noLFUntil > r.pos {
		from = int(min(r.noLFUntil-r.pos, int64(len(buf))))
	}
	lf := bytes.IndexByte(buf[from:], '\n')
	if lf >= 0 {
		lf += from
	} else {
		r.noLFUntil = r.pos + int64(len(buf))
		lf = len(buf)
	}
	cr := bytes.IndexByte(buf[:lf], '\r')
	switch {
	case cr < 0 && lf == len(buf):
		return -1, 0
	case cr < 0:
		return lf, 1
	case cr+1 == len(buf):
		return cr, 0
	case buf[cr+1] == '\n':
		return cr, 2
	default:
		return cr, 1
	}
}

// indexLineEnd is the index of the first '\r' or '\n' in b, or -1.
func indexLineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	search := b
	if lf >= 0 {
		search = b[:lf]
	}
	if cr := bytes.IndexByte(search, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

var writeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuffer keeps one huge event from pinning its buffer in the pool.
const maxPooledBuffer = 64 << 10

// WriteData writes one event with data as its data, in a single Write:
// "data: <data>\n\n". Line breaks in data ("\r\n", "\r" or "\n") become
// separate data lines, so a Reader gets data back with each line break turned
// into "\n", and nothing in data can end the event early or add fields.
func WriteData(w io.Writer, data []byte) error {
	return write(w, "data: ", data)
}

// WriteEvent writes one event named name ("event: <name>", then its data
// as WriteData does), in a single Write; an empty name writes a data-only
// event. Line breaks cannot be part of a name: they are replaced by
// spaces, so nothing in name can end the event early or add fields.
func WriteEvent(w io.Writer, name string, data []byte) error {
	if name == "" {
		return WriteData(w, data)
	}
	bp := writeBuffers.Get().(*[]byte)
	b := append((*bp)[:0], "event: "...)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	b = append(b, '\n')
	b = appendData(b, "data: ", data)
	_, err := w.Write(b)
	if cap(b) <= maxPooledBuffer {
		*bp = b
		writeBuffers.Put(bp)
	}
	return err
}

func write(w io.Writer, prefix string, payload []byte) error {
	bp := writeBuffers.Get().(*[]byte)
	b := appendData((*bp)[:0], prefix, payload)
	_, err := w.Write(b)
	if cap(b) <= maxPooledBuffer {
		*bp = b
		writeBuffers.Put(bp)
	}
	return err
}

// appendData appends payload as prefixed lines (one per line break) and the
// blank line that ends the event.
func appendData(b []byte, prefix string, payload []byte) []byte {
	for {
		b = append(b, prefix...)
		i := indexLineEnd(payload)
		if i < 0 {
			b = append(b, payload...)
			b = append(b, '\n')
			break
		}
		b = append(b, payload[:i]...)
		b = append(b, '\n')
		if payload[i] == '\r' && i+1 < len(payload) && payload[i+1] == '\n' {
			i++
		}
		payload = payload[i+1:]
	}
	return append(b, '\n')
}
