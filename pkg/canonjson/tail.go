package canonjson

import (
	"bytes"
	"sync/atomic"
)

// A large input is parsed on two goroutines. The second starts at a guess
// of an array element's start past the middle of the input (an object that
// follows an object: "}", ",", "{"), and writes the canonical form of the
// elements from there to the array's end; the first parses from the start
// as ever. If the first reaches the guess as the start of an element, the
// text from there to the array's end is a run of elements whatever came
// before it, so the second's form is the one it would have written, and it
// takes it in place of those elements; if not (the guess fell inside a
// string, say), or if the second met anything it refuses, the first
// parses on alone and nothing of the second is used. Either way the form,
// and every error with its offset, are those of one goroutine.

// parallelMin is the input size from which a second goroutine helps.
var parallelMin = 256 << 10

// splitWindow bounds how far past the middle the guess is looked for.
const splitWindow = 64 << 10

// tail is the second goroutine's work.
type tail struct {
	at   int // where its first element starts
	stop atomic.Bool
	done chan struct{}
	// Set before done is closed: ok, and then end (the offset of the
	// array's ']'), depth (the deepest nesting within the elements) and
	// text (the elements' canonical forms, joined by commas).
	ok    bool
	end   int
	depth int
	text  []byte
	q     *parser
}

// splitAt guesses where an array element starts past the middle of data:
// the '{' of "}" "," "{" (whitespace allowed between), or -1.
func splitAt(data []byte) int {
	from := len(data) / 2
	limit := min(len(data), from+splitWindow)
	for i := from; i < limit; {
		j := bytes.IndexByte(data[i:limit], '}')
		if j < 0 {
			return -1
		}
		k := skipWS(data, i+j+1)
		if k < len(data) && data[k] == ',' {
			if k = skipWS(data, k+1); k < len(data) && data[k] == '{' {
				return k
			}
		}
		i += j + 1
	}
	return -1
}

func skipWS(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// startTail starts the second goroutine for data of at least from bytes,
// or returns nil.
func startTail(data []byte, from int) *tail {
	if len(data) < from {
		return nil
	}
	at := splitAt(data)
	if at < 0 {
		return nil
	}
	t := &tail{at: at, done: make(chan struct{})}
	go t.run(data)
	return t
}

// run parses elements from t.at to the array's end, writing each as it
// is parsed, and stops early once the first goroutine has no use for it.
func (t *tail) run(data []byte) {
	defer close(t.done)
	defer func() {
		// A bug here must not end the process: the first goroutine
		// parses on alone, and meets it there, where it is recovered.
		if recover() != nil {
			t.ok = false
		}
	}()
	q := parserPool.Get().(*parser)
	t.q = q
	q.data, q.pos, q.depth, q.maxDepth = data, t.at, 0, 0
	// The form is about as long as the text it is written from: one
	// allocation rather than a doubling buffer's copies.
	o := out{buf: q.out[:0]}
	if rest := len(data) - t.at + 64; cap(o.buf) < rest {
		o.buf = make([]byte, 0, rest)
	}
	defer func() { q.out = o.buf }()
	for !t.stop.Load() {
		if q.value() != nil {
			return
		}
		if len(o.buf) > 0 {
			o.buf = append(o.buf, ',')
		}
		q.write(&o, &q.stack[len(q.stack)-1])
		// What the element's form was written from is not needed again.
		q.stack, q.vals, q.arena = q.stack[:0], q.vals[:0], q.arena[:0]
		q.skipSpace()
		if q.pos >= len(data) {
			return
		}
		switch data[q.pos] {
		case ',':
			q.pos++
			q.skipSpace()
		case ']':
			t.ok, t.end, t.depth, t.text = true, q.pos, q.maxDepth, o.buf
			return
		default:
			return
		}
	}
}

// takeTail is called by the first goroutine at an array element's start
// that is the tail's: it waits for the tail and, when its form can stand
// for the rest of the array, pushes it as one value and moves to the
// array's ']'. Otherwise it reports false, and the elements are parsed
// here.
func (p *parser) takeTail() bool {
	t := p.tail
	p.tail = nil
	<-t.done
	if !t.ok || p.depth+t.depth > MaxDepth {
		p.dropTail(t)
		return false
	}
	p.tails = append(p.tails, t)
	p.stack = append(p.stack, value{kind: kindRaw, off: int32(t.at), start: int32(len(p.tails) - 1)})
	p.pos = t.end
	return true
}

// endTail stops a tail the parse never reached and waits for it, so that
// nothing reads the input once parse has returned.
func (p *parser) endTail() {
	if t := p.tail; t != nil {
		p.tail = nil
		t.stop.Store(true)
		<-t.done
		p.dropTail(t)
	}
}

func (p *parser) dropTail(t *tail) {
	if t.q != nil {
		t.q.release()
		t.q, t.text = nil, nil
	}
}
