package llm

import (
	"bytes"
	"sync/atomic"
)

// A large body's messages are checked on two goroutines. The second starts
// at a guess of a message's start past the middle of the body (an object
// whose first member is "role", after an object: "}" "," "{"), and checks
// the messages from there to the array's end; the first checks from the
// start as ever. If the first reaches the guess as the start of a message
// of its array, the text from there to the array's end is a run of
// messages whatever came before it, so the second's verdict is the one it
// would have reached; if not (the guess fell in a string, or in another
// array), or if the second found anything it does not pass, the first goes
// on alone. Either way the result is one goroutine's (FuzzMessagesTail).

// BenchmarkDecodeChatRequest's split-hand-0 and split-hand-262144 keep it:
// two goroutines take about two thirds of one's time on a 1 MB body.

// parallelMessages is the body size from which a second goroutine helps.
const parallelMessages = 256 << 10

// msgSplitWindow bounds how far past the middle the guess is looked for.
const msgSplitWindow = 64 << 10

// msgTail is the second goroutine's work.
type msgTail struct {
	at   int
	stop atomic.Bool
	done chan struct{}
	// Set before done is closed: ok, and then n (the messages checked)
	// and end (the offset of the array's ']').
	ok     bool
	n, end int
	// objectKey: the messages checked had a member name the scanner
	// notes (scanner.noteObjects).
	objectKey bool
}

// startMsgTail starts the second goroutine for the messages array at s.i
// (its '['), or returns nil. A checked body's (quotesOnly) messages are
// checked on one goroutine: its fingerprint has the other CPU.
func startMsgTail(s *scanner) *msgTail {
	if s.split == 0 || len(s.b) < s.split || s.quotesOnly {
		return nil
	}
	at := messageAt(s.b, max(s.i, len(s.b)/2))
	if at < 0 {
		return nil
	}
	t := &msgTail{at: at, done: make(chan struct{})}
	go t.run(scanner{b: s.b, i: at, unique: s.unique, noteObjects: s.noteObjects})
	return t
}

// messageAt guesses where a message starts from b[from] on: the '{' of "}"
// "," "{" "\"role\"" (whitespace allowed between), or -1.
func messageAt(b []byte, from int) int {
	limit := min(len(b), from+msgSplitWindow)
	for i := from; i < limit; {
		j := bytes.IndexByte(b[i:limit], '}')
		if j < 0 {
			return -1
		}
		s := scanner{b: b, i: i + j + 1}
		if s.peek() == ',' {
			s.i++
			if s.peek() == '{' {
				k := s.i
				s.i++
				if s.ws(); bytes.HasPrefix(b[s.i:], []byte(`"role"`)) {
					return k
				}
			}
		}
		i += j + 1
	}
	return -1
}

// run checks messages from t.at to the array's end.
func (t *msgTail) run(q scanner) {
	defer close(t.done)
	n := 0
	for !t.stop.Load() {
		if !q.message() {
			return
		}
		n++
		switch q.peek() {
		case ',':
			q.i++
			q.ws()
		case ']':
			t.ok, t.n, t.end, t.objectKey = true, n, q.i, q.objectKey
			return
		default:
			return
		}
	}
}

// result waits for the second goroutine's verdict.
func (t *msgTail) result() (n, end int, ok bool) {
	<-t.done
	return t.n, t.end, t.ok
}

// finish stops the second goroutine if the first never reached it, and
// waits for it, so that nothing reads the body once the check is over.
func (t *msgTail) finish() {
	if t != nil {
		t.stop.Store(true)
		<-t.done
	}
}
