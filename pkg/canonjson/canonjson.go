// Package canonjson writes JSON in a canonical form, after RFC 8785 (JSON
// Canonicalization Scheme, JCS): two JSON texts that differ only in
// insignificant ways (member order, whitespace, string escaping, number
// spelling) canonicalize to the same bytes, and texts that differ in any
// significant way canonicalize to different bytes. It exists to fingerprint
// request bodies (for example for Idempotency-Key handling), where
// conflating two different requests is the failure that must never happen,
// while separating two equivalent ones is merely a conservative miss.
//
// The canonical form:
//
//   - No whitespace.
//   - Object members sorted by name, comparing names as sequences of UTF-16
//     code units (RFC 8785 section 3.2.3). Duplicate names are an error,
//     since parsers disagree about which one wins.
//   - Strings: escapes in the input are decoded first; the output escapes
//     only '"', '\\', and control characters below U+0020 (as \b \f \n \r \t,
//     or \u00xx with lowercase hex). Everything else, including '/', '<',
//     '>', '&', U+007F, U+2028 and U+2029, is written as literal UTF-8.
//     Invalid UTF-8 and unpaired surrogate escapes are errors (replacing
//     them would let different inputs collide).
//   - Integer literals (no fraction, no exponent) are kept exactly as
//     written, whatever their size, except that "-0" becomes "0".
//   - Other numbers are parsed as IEEE 754 float64 and written the way
//     ECMAScript's Number.prototype.toString does (RFC 8785 section 3.2.2.3):
//     1e21 → 1e+21, 1e-7 → 1e-7, 0.000001 → 0.000001, 100.0 → 100.
//     A float literal therefore stands for its float64 value: 0.1 and
//     0.10000000000000000001 are the same number, and so are 1e2, 100.0 and
//     the integer 100. Literals beyond the float64 range are an error.
//     One deliberate departure from RFC 8785: an integral float of
//     magnitude at least 2^53 whose ECMAScript form would be a digit string
//     that is not its exact value (e.g. 2^60, which ECMAScript writes as
//     1152921504606847000 rather than 1152921504606846976) is written in
//     exponent form instead (1.152921504606847e+18); otherwise it would be
//     indistinguishable from the integer literal 1152921504606847000, which
//     is kept exactly and is a different number.
//   - true, false and null as such; array elements in order.
//
// The input must be exactly one JSON value (RFC 8259) with optional
// whitespace around it. Everything encoding/json rejects is rejected;
// beyond that, duplicate member names, invalid UTF-8, unpaired surrogates,
// float overflow and nesting deeper than [MaxDepth] are rejected too.
//
// Numbers are formatted and strings quoted by go-json-experiment's
// jsontext, as its RFC 8785 canonicalization does. The parser is this
// package's own: on a coding agent's body of 10 KB to 1 MB, a keyed
// request's fingerprint takes 1.7 times as long with
// [jsontext.Value.Canonicalize] alone, which rounds large integers, and
// 8 times with the rules above on top (BenchmarkJSONText). FuzzJSONText
// holds the parser to jsontext's form plus these rules.
package canonjson

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/internal/jsonscan"
)

// MaxDepth is the deepest nesting of arrays and objects accepted: a value
// nested inside MaxDepth arrays or objects is fine, one more level is an
// error.
const MaxDepth = 1000

// DuplicateName begins the message of an Error for an object with a member
// name given twice; the name follows, quoted as by strconv.Quote.
const DuplicateName = "duplicate object member name "

// Error reports why an input could not be canonicalized.
type Error struct {
	Offset int    // byte offset in the input where the problem was detected
	Msg    string // what is wrong
}

func (e *Error) Error() string {
	return "canonjson: " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Canonicalize parses data, which must hold exactly one JSON value, and
// returns its canonical form as described in the package documentation.
// Errors are of type [*Error]. Inputs over 256 MiB are rejected.
func Canonicalize(data []byte) ([]byte, error) {
	return CanonicalizeWithout(data)
}

// CanonicalizeWithout is like [Canonicalize] but first removes the object
// member at path, walked from the top-level object: for path
// ("stream_options", "include_usage") it drops
// {"stream_options":{"include_usage":…}} from the top-level object.
//
// Removal only happens when the top-level value and every value along the
// path before the last name are objects; if the walk meets a value of
// another kind, nothing is removed. A name that is absent simply ends the
// walk. After the removal (whether or not something was removed), each
// object on the walked path below the top level that is empty is removed
// from its parent, deepest first, so that {"stream_options":{}} is dropped
// as well: an empty object there means the same as no object. The
// top-level object itself is never removed. With an empty path,
// CanonicalizeWithout is Canonicalize.
func CanonicalizeWithout(data []byte, path ...string) ([]byte, error) {
	p := parserPool.Get().(*parser)
	defer p.release()
	root, err := p.parse(data)
	if err != nil {
		return nil, err
	}
	if len(path) > 0 && root.kind == kindObject {
		p.remove(&root, path)
	}
	o := out{buf: make([]byte, 0, len(data))}
	p.write(&o, &root)
	return o.buf, nil
}

// WriteWithout writes what [CanonicalizeWithout] returns to w without
// holding it in memory: it calls length with the canonical form's length
// in bytes, then writes the form to w, in pieces. It returns the first
// error of parsing (an [*Error], and then nothing was written and length
// was not called) or of w. For a hash of a length-prefixed form, such as
// a request's fingerprint, it saves a copy of the whole form.
func WriteWithout(w io.Writer, length func(n int), data []byte, path ...string) error {
	p := parserPool.Get().(*parser)
	defer p.release()
	root, err := p.parse(data)
	if err != nil {
		return err
	}
	if len(path) > 0 && root.kind == kindObject {
		p.remove(&root, path)
	}
	if length != nil {
		length(p.size(&root))
	}
	o := out{buf: p.out[:0], w: w}
	p.write(&o, &root)
	o.flush()
	p.out = o.buf
	return o.err
}

type kind uint8

const (
	kindNull kind = iota
	kindTrue
	kindFalse
	kindNumber // text is the canonical number
	kindString // text is the decoded string (valid UTF-8), or see canon
	kindArray
	kindObject
)

// value is one parsed JSON value. The children of arrays and objects are
// parser.vals[start : start+n], object members sorted by key. It holds no
// pointers, so that large inputs cost the garbage collector nothing.
type value struct {
	key     span  // decoded member name, for object members
	text    span  // see kind
	off     int32 // input offset of the member name or value, for errors
	start   int32
	n       int32
	kind    kind
	removed bool // dropped by CanonicalizeWithout
	// canon: text is a string's contents already in canonical form
	// (strValue), not decoded.
	canon bool
}

// span locates bytes in the input, or in the arena if arena is set.
type span struct {
	start, end int32
	arena      bool
}

func (p *parser) bytes(s span) []byte {
	if s.arena {
		return p.arena[s.start:s.end]
	}
	return p.data[s.start:s.end]
}

// maxInput is the largest input accepted, so that offsets into the input
// and into the arena fit in an int32: the arena holds decoded strings (no
// longer than in the input) and formatted floats (at most 22 bytes from at
// least 5 input bytes: "-9e20," gives -900000000000000000000).
const maxInput = 1 << 28

type parser struct {
	data  []byte
	pos   int
	depth int
	// stack holds values whose parent is still being parsed; when an array
	// or object ends, its children are moved as one block to vals.
	stack []value
	vals  []value
	// arena holds decoded strings and formatted floats.
	arena []byte
	// out is WriteWithout's buffer.
	out []byte
	// validUTF8: the input is known to be valid UTF-8 (see parse).
	validUTF8 bool
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

const (
	maxPooled      = 1 << 16 // elements; larger scratch buffers are dropped
	maxPooledArena = 4 << 20 // bytes: the arena of an input of up to 4 MiB
)

func (p *parser) release() {
	if cap(p.stack) > maxPooled || cap(p.vals) > maxPooled || cap(p.arena) > maxPooledArena {
		return
	}
	out := p.out[:0]
	if cap(out) > 4*flushAt {
		out = nil // a long member name grew it
	}
	*p = parser{stack: p.stack[:0], vals: p.vals[:0], arena: p.arena[:0], out: out}
	parserPool.Put(p)
}

func (p *parser) fail(off int, msg string) error {
	return &Error{Offset: off, Msg: msg}
}

// checkUTF8Apart is the input size from which the input's UTF-8 is checked
// whole, on a goroutine of its own, while it is parsed: for a large body
// the check is an eighth of the parse's work, and a second CPU does the two
// at once.
const checkUTF8Apart = 128 << 10

func (p *parser) parse(data []byte) (value, error) {
	if len(data) > maxInput {
		return value{}, &Error{Offset: maxInput, Msg: "input larger than " + strconv.Itoa(maxInput) + " bytes"}
	}
	if len(data) < checkUTF8Apart {
		return p.parseOnce(data)
	}
	// The input is valid UTF-8 if and only if every string's raw bytes
	// are (outside strings only ASCII is JSON), so with a valid input the
	// string values' own checks could only pass: they are skipped. An
	// invalid input is parsed again with them, so that the error is the
	// one a single parse gives, whatever else is wrong with it.
	valid := make(chan bool, 1)
	go func() { valid <- utf8.Valid(data) }()
	p.validUTF8 = true
	root, err := p.parseOnce(data)
	p.validUTF8 = false
	if <-valid {
		return root, err
	}
	p.stack, p.vals, p.arena = p.stack[:0], p.vals[:0], p.arena[:0]
	return p.parseOnce(data)
}

func (p *parser) parseOnce(data []byte) (value, error) {
	p.data = data
	p.pos = 0
	p.depth = 0
	p.skipSpace()
	if err := p.value(); err != nil {
		return value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return value{}, p.fail(p.pos, "unexpected data after top-level value")
	}
	return p.stack[0], nil
}

func (p *parser) skipSpace() { p.pos = jsonscan.SkipSpace(p.data, p.pos) }

// value parses one value at p.pos (after whitespace) and pushes it.
func (p *parser) value() error {
	if p.pos >= len(p.data) {
		return p.fail(p.pos, "unexpected end of input")
	}
	off := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, canon, err := p.strValue()
		if err != nil {
			return err
		}
		p.stack = append(p.stack, value{kind: kindString, text: s, canon: canon, off: int32(off)})
		return nil
	case c == 't':
		return p.literal("true", kindTrue)
	case c == 'f':
		return p.literal("false", kindFalse)
	case c == 'n':
		return p.literal("null", kindNull)
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	default:
		return p.fail(p.pos, "invalid character "+strconv.QuoteRune(rune(c))+" looking for beginning of value")
	}
}

func (p *parser) literal(lit string, k kind) error {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return p.fail(p.pos, "invalid literal, expected "+lit)
	}
	p.stack = append(p.stack, value{kind: k, off: int32(p.pos)})
	p.pos += len(lit)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.fail(p.pos, "nesting deeper than "+strconv.Itoa(MaxDepth))
	}
	return nil
}

// close moves the children pushed since mark into vals and pushes the
// container itself.
func (p *parser) close(mark, off int, k kind) {
	kids := p.stack[mark:]
	start := len(p.vals)
	p.vals = append(p.vals, kids...)
	p.stack = append(p.stack[:mark], value{kind: k, off: int32(off), start: int32(start), n: int32(len(kids))})
	p.depth--
}

func (p *parser) array() error {
	off, mark := p.pos, len(p.stack)
	if err := p.items(']'); err != nil {
		return err
	}
	p.close(mark, off, kindArray)
	return nil
}

// items parses the elements of the array or the members of the object at
// p.pos, whose closing byte is end, pushing their values (a member's with
// its name as key).
func (p *parser) items(end byte) error {
	more, err := p.open(end)
	if err != nil {
		return err
	}
	for more {
		p.skipSpace()
		var key span
		keyOff := p.pos
		if end == '}' {
			if p.pos >= len(p.data) || p.data[p.pos] != '"' {
				return p.fail(p.pos, "expected string for object member name")
			}
			if key, err = p.str(); err != nil {
				return err
			}
			p.skipSpace()
			if p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return p.fail(p.pos, "expected ':' after object member name")
			}
			p.pos++
			p.skipSpace()
		}
		if err := p.value(); err != nil {
			return err
		}
		if end == '}' {
			m := &p.stack[len(p.stack)-1]
			m.key, m.off = key, int32(keyOff)
		}
		// A comma (more items) or end follows.
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ',' && p.data[p.pos] != end {
			return p.afterItem(end)
		}
		more = p.data[p.pos] == ','
		p.pos++
	}
	return nil
}

// afterItem is the error at p.pos, where a comma or end should follow an
// item of the array or object that end closes.
func (p *parser) afterItem(end byte) error {
	eof, bad := "unexpected end of input in array", "expected ',' or ']' after array element"
	if end == '}' {
		eof, bad = "unexpected end of input in object", "expected ',' or '}' after object member"
	}
	if p.pos < len(p.data) {
		eof = bad
	}
	return p.fail(p.pos, eof)
}

// open enters the container at p.pos, whose closing byte is end, and
// reports whether it has members: an empty one is passed over whole.
func (p *parser) open(end byte) (more bool, err error) {
	if err := p.enter(); err != nil {
		return false, err
	}
	p.pos++ // '[' or '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == end {
		p.pos++
		return false, nil
	}
	return true, nil
}

func (p *parser) object() error {
	off, mark := p.pos, len(p.stack)
	if err := p.items('}'); err != nil {
		return err
	}
	kids := p.stack[mark:]
	slices.SortFunc(kids, func(a, b value) int { return compareUTF16(p.bytes(a.key), p.bytes(b.key)) })
	for i := 1; i < len(kids); i++ {
		if k := p.bytes(kids[i].key); string(p.bytes(kids[i-1].key)) == string(k) {
			if len(k) > 64 {
				k = k[:64]
			}
			return p.fail(int(max(kids[i-1].off, kids[i].off)), DuplicateName+strconv.Quote(string(k)))
		}
	}
	p.close(mark, off, kindObject)
	return nil
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units.
// This is code point order except that supplementary characters (encoded
// as surrogates D800–DFFF) sort before BMP characters E000–FFFF.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// Back up to the start of the rune holding the first difference; the
	// common prefix puts it at the same offset in both strings.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	ua, ub := utf16Unit(ra), utf16Unit(rb)
	if ua != ub {
		return int(ua) - int(ub)
	}
	// Same high surrogate: the low surrogates decide, and they are in the
	// same order as the runes.
	return int(ra) - int(rb)
}

// utf16Unit returns the first UTF-16 code unit of r.
func utf16Unit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	hi, _ := utf16.EncodeRune(r)
	return hi
}

// str parses a string literal at p.pos (the opening quote) and returns
// where its decoded contents are.
func (p *parser) str() (span, error) {
	p.pos++ // '"'
	start := p.pos
	// Fast path: no escapes, the contents are the input bytes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := span{start: int32(start), end: int32(p.pos)}
			p.pos++
			return s, nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return span{}, p.fail(p.pos, "invalid control character in string")
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return span{}, p.fail(p.pos, "invalid UTF-8 in string")
			}
			p.pos += size
		}
	}
	return span{}, p.fail(p.pos, "unexpected end of input in string")
}

// strSlow decodes a string with escapes with jsontext; data[start:p.pos]
// has been checked already and p.pos is at a backslash.
func (p *parser) strSlow(start int) (span, error) {
	end := p.pos // the closing quote: the first one not escaped
	for end < len(p.data) && p.data[end] != '"' {
		if p.data[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(p.data) {
		return span{}, p.fail(len(p.data), "unexpected end of input in string")
	}
	a := len(p.arena)
	arena, err := jsontext.AppendUnquote(p.arena, p.data[start-1:end+1])
	if err != nil {
		// An invalid escape, control character or UTF-8 sequence, or an
		// unpaired surrogate escape.
		return span{}, p.fail(p.pos, "invalid string: "+strings.TrimPrefix(err.Error(), "jsontext: "))
	}
	p.arena = arena
	p.pos = end + 1
	return span{start: int32(a), end: int32(len(p.arena)), arena: true}, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (p *parser) number() error {
	off := p.pos
	d := p.data
	if d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && '1' <= d[p.pos] && d[p.pos] <= '9':
		p.pos = skipDigits(d, p.pos+1)
	default:
		return p.fail(p.pos, "invalid number")
	}
	integer := true
	if p.pos < len(d) && d[p.pos] == '.' {
		integer = false
		p.pos++
		end := skipDigits(d, p.pos)
		if end == p.pos {
			return p.fail(p.pos, "invalid number: expected digit after decimal point")
		}
		p.pos = end
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		integer = false
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		end := skipDigits(d, p.pos)
		if end == p.pos {
			return p.fail(p.pos, "invalid number: expected digit in exponent")
		}
		p.pos = end
	}
	lit := d[off:p.pos]
	if integer {
		s := span{start: int32(off), end: int32(p.pos)}
		if string(lit) == "-0" {
			s.start++
		}
		p.stack = append(p.stack, value{kind: kindNumber, text: s, off: int32(off)})
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil { // only ErrRange: beyond ±MaxFloat64 (underflow gives 0, nil)
		return p.fail(off, "number out of float64 range")
	}
	a := len(p.arena)
	p.arena = appendFloat(p.arena, f)
	p.stack = append(p.stack, value{kind: kindNumber, text: span{start: int32(a), end: int32(len(p.arena)), arena: true}, off: int32(off)})
	return nil
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// appendFloat appends the canonical form of a finite float: the ECMAScript
// form, except for the departure described in the package documentation.
func appendFloat(dst []byte, f float64) []byte {
	if a := math.Abs(f); a >= 1<<53 && a < 1e21 {
		// Integral; ECMAScript writes it as a plain digit string, which
		// must be its exact value or it would read as another integer.
		var es, exact [32]byte
		if string(appendES(es[:0], f, false)) != string(strconv.AppendFloat(exact[:0], f, 'f', 0, 64)) {
			return appendES(dst, f, true)
		}
	}
	return appendES(dst, f, false)
}

// appendES appends f (finite) as ECMAScript's Number::toString does
// (jsontext's RFC 8785 number form), or always in exponent form if
// forceExp.
func appendES(dst []byte, f float64, forceExp bool) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if !forceExp {
		return jsontext.AppendFloat(dst, f, 64)
	}
	// strconv's shortest exponent form, the exponent without the leading
	// zero strconv writes below 10: 1e+00 → 1e+0, 1.5e-07 → 1.5e-7.
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	if n := len(dst); dst[n-4] == 'e' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
}

// remove implements the member removal of CanonicalizeWithout; obj is the
// top-level object.
func (p *parser) remove(obj *value, path []string) {
	var chain []*value // objects walked below the top level
	cur := obj
	for i, name := range path {
		m := p.member(cur, name)
		if m == nil {
			break
		}
		if i == len(path)-1 {
			m.removed = true
			break
		}
		if m.kind != kindObject {
			return
		}
		chain = append(chain, m)
		cur = m
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if !p.empty(chain[i]) {
			break
		}
		chain[i].removed = true
	}
}

func (p *parser) member(obj *value, name string) *value {
	kids := p.vals[obj.start : obj.start+obj.n]
	for i := range kids {
		if !kids[i].removed && string(p.bytes(kids[i].key)) == name {
			return &kids[i]
		}
	}
	return nil
}

func (p *parser) empty(obj *value) bool {
	for _, m := range p.vals[obj.start : obj.start+obj.n] {
		if !m.removed {
			return false
		}
	}
	return true
}

func (p *parser) write(o *out, v *value) {
	switch v.kind {
	case kindNull:
		o.buf = append(o.buf, "null"...)
		o.check()
	case kindTrue:
		o.buf = append(o.buf, "true"...)
		o.check()
	case kindFalse:
		o.buf = append(o.buf, "false"...)
		o.check()
	case kindNumber:
		o.buf = append(o.buf, p.bytes(v.text)...)
		o.check()
	case kindString:
		if v.canon {
			o.buf = append(o.buf, '"')
			o.bytes(p.bytes(v.text))
			o.buf = append(o.buf, '"')
			return
		}
		o.buf = appendString(o.buf, p.bytes(v.text))
		o.check()
	case kindArray:
		o.buf = append(o.buf, '[')
		for i := range v.n {
			if i > 0 {
				o.buf = append(o.buf, ',')
			}
			p.write(o, &p.vals[v.start+i])
		}
		o.buf = append(o.buf, ']')
	default: // kindObject
		o.buf = append(o.buf, '{')
		first := true
		for i := range v.n {
			m := &p.vals[v.start+i]
			if m.removed {
				continue
			}
			if !first {
				o.buf = append(o.buf, ',')
			}
			first = false
			o.buf = appendString(o.buf, p.bytes(m.key))
			o.buf = append(o.buf, ':')
			p.write(o, m)
		}
		o.buf = append(o.buf, '}')
	}
}

// size is the length of v's canonical form: what write writes.
func (p *parser) size(v *value) int {
	switch v.kind {
	case kindNull, kindTrue:
		return 4
	case kindFalse:
		return 5
	case kindNumber:
		return int(v.text.end - v.text.start)
	case kindString:
		if v.canon {
			return int(v.text.end-v.text.start) + 2
		}
		return stringSize(p.bytes(v.text))
	case kindArray:
		n := 2 + max(int(v.n)-1, 0) // the brackets and the commas
		for i := range v.n {
			n += p.size(&p.vals[v.start+i])
		}
		return n
	default: // kindObject
		n, members := 2, 0
		for i := range v.n {
			m := &p.vals[v.start+i]
			if m.removed {
				continue
			}
			members++
			n += stringSize(p.bytes(m.key)) + 1 + p.size(m)
		}
		return n + max(members-1, 0)
	}
}

// out is where write writes: a buffer, that is the whole canonical form
// when w is nil, and otherwise is written to w whenever it holds flushAt
// bytes or more (a long string goes to w straight from the input).
type out struct {
	buf []byte
	w   io.Writer
	err error
}

// flushAt is how much out buffers before it writes to w.
const flushAt = 16 << 10

// bytes appends b, or writes it to w without a copy when it is long.
func (o *out) bytes(b []byte) {
	if o.w == nil || len(b) < flushAt {
		o.buf = append(o.buf, b...)
		o.check()
		return
	}
	o.flush()
	if o.err == nil {
		_, o.err = o.w.Write(b)
	}
}

// check writes the buffer to w once it holds flushAt bytes.
func (o *out) check() {
	if o.w != nil && len(o.buf) >= flushAt {
		o.flush()
	}
}

func (o *out) flush() {
	if len(o.buf) > 0 && o.err == nil {
		_, o.err = o.w.Write(o.buf)
	}
	o.buf = o.buf[:0]
}

const hexDigits = "0123456789abcdef"

// stringSize is len(appendString(nil, s)).
func stringSize(s []byte) int {
	n := len(s) + 2
	for _, c := range s {
		switch {
		case shortEscape[c] != 0:
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

// appendString appends s (valid UTF-8) as a JSON string with RFC 8785
// escaping, as jsontext writes it.
func appendString(dst, s []byte) []byte {
	dst, _ = jsontext.AppendQuote(dst, s) // s is valid UTF-8: no error
	return dst
}
