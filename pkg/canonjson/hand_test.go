package canonjson

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// The package formats numbers and quotes strings with jsontext. The
// hand-written formatters it had are kept here as the reference that holds
// the canonical form, and with it every stored fingerprint, to the same
// bytes.

// handAppendES appends f (finite) as ECMAScript's Number::toString does, or
// always in exponent form if forceExp.
func handAppendES(dst []byte, f float64, forceExp bool) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits: d[.ddd]e±XX.
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [24]byte
	k := 0
	i := 0
	for ; b[i] != 'e'; i++ {
		if b[i] != '.' {
			digits[k] = b[i]
			k++
		}
	}
	i++ // 'e'
	neg := b[i] == '-'
	i++ // sign
	e := 0
	for ; i < len(b); i++ {
		e = e*10 + int(b[i]-'0')
	}
	if neg {
		e = -e
	}
	// ECMAScript: value = 0.d1d2…dk × 10^n.
	n := e + 1
	ds := digits[:k]
	switch {
	case forceExp:
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for range n - k {
			dst = append(dst, '0')
		}
		return dst
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		return append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		return append(dst, ds...)
	}
	dst = append(dst, ds[0])
	if k > 1 {
		dst = append(dst, '.')
		dst = append(dst, ds[1:]...)
	}
	dst = append(dst, 'e')
	if n-1 < 0 {
		dst = append(dst, '-')
	} else {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(handAbs(n-1)), 10)
}

func handAbs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// handAppendString appends s (valid UTF-8) as a JSON string with RFC 8785
// escaping.
func handAppendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// TestAppendESMatchesHand compares appendES with the hand-written
// formatter on random floats and the layout boundaries, in both forms.
func TestAppendESMatchesHand(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(f float64) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return
		}
		for _, forceExp := range []bool{false, true} {
			if got, want := appendES(nil, f, forceExp), handAppendES(nil, f, forceExp); !bytes.Equal(got, want) {
				t.Fatalf("appendES(%v [%016x], %v) = %s, hand-written = %s", f, math.Float64bits(f), forceExp, got, want)
			}
		}
	}
	for range 300000 {
		check(math.Float64frombits(rng.Uint64()))
		check(math.Pow10(rng.IntN(60)-30) * (1 + (rng.Float64()-0.5)*1e-15))
		check(float64(rng.Int64N(1<<62)) * math.Pow10(rng.IntN(8)))
		check(float64(rng.IntN(1000)) * math.Pow10(rng.IntN(40)-20))
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, 1e21, 1e-6, 1e-7, 1e-10, 1e100, 5e-324,
		math.MaxFloat64, 1 << 53, 1 << 60, 999999999999999999999, 0.0000009999999999999999} {
		check(f)
		check(-f)
	}
}

// FuzzAppendFloatMatchesHand compares the two on fuzzed float bits.
func FuzzAppendFloatMatchesHand(f *testing.F) {
	for _, v := range []float64{0, 1, 1e21, 1e-7, 1 << 60, 0.1, 333333333.33333329} {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		for _, forceExp := range []bool{false, true} {
			if got, want := appendES(nil, v, forceExp), handAppendES(nil, v, forceExp); !bytes.Equal(got, want) {
				t.Fatalf("appendES(%v, %v) = %s, hand-written = %s", v, forceExp, got, want)
			}
		}
	})
}

// FuzzAppendStringMatchesHand compares appendString with the hand-written
// quoting, and stringSize with its length, on valid UTF-8.
func FuzzAppendStringMatchesHand(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\/\b\f\n\r\t\x00\x1f\x7f", "<>&\u2028\u2029", "é😀", "\ufeff\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		got, want := appendString(nil, []byte(s)), handAppendString(nil, []byte(s))
		if !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %q, hand-written = %q", s, got, want)
		}
		if n := stringSize([]byte(s)); n != len(got) {
			t.Fatalf("stringSize(%q) = %d, appendString wrote %d bytes", s, n, len(got))
		}
	})
}

// TestAppendStringMatchesHand runs the comparison on every character
// below U+0800 and some above, alone and inside text.
func TestAppendStringMatchesHand(t *testing.T) {
	for r := rune(0); r < 0x10FFFF; r++ {
		if r >= 0x800 && r%97 != 0 && r != 0x2028 && r != 0x2029 && r != 0xFEFF && r != 0xFFFD {
			continue
		}
		if !utf8.ValidRune(r) {
			continue
		}
		s := []byte("a" + string(r) + "b")
		if got, want := appendString(nil, s), handAppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %q, hand-written = %q", s, got, want)
		}
	}
}

// The escape decoder the package had, the reference for
// jsontext.AppendUnquote in strSlow.

// handStrSlow decodes a string with escapes; data[start:p.pos] has been checked
// already and p.pos is at a backslash.
func (p *parser) handStrSlow(start int) (span, error) {
	a := len(p.arena)
	p.arena = append(p.arena, p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return span{start: int32(a), end: int32(len(p.arena)), arena: true}, nil
		case c == '\\':
			if err := p.handEscape(); err != nil {
				return span{}, err
			}
		case c < 0x20:
			return span{}, p.fail(p.pos, "invalid control character in string")
		case c < utf8.RuneSelf:
			p.arena = append(p.arena, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return span{}, p.fail(p.pos, "invalid UTF-8 in string")
			}
			p.arena = append(p.arena, p.data[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return span{}, p.fail(p.pos, "unexpected end of input in string")
}

// handEscape decodes the escape sequence at p.pos (a backslash) into the arena.
func (p *parser) handEscape() error {
	off := p.pos
	if p.pos+1 >= len(p.data) {
		return p.fail(off, "unexpected end of input in string escape")
	}
	var b byte
	switch p.data[p.pos+1] {
	case '"', '\\', '/':
		b = p.data[p.pos+1]
	case 'b':
		b = '\b'
	case 'f':
		b = '\f'
	case 'n':
		b = '\n'
	case 'r':
		b = '\r'
	case 't':
		b = '\t'
	case 'u':
		r, ok := hex4(p.data[p.pos+2:])
		if !ok {
			return p.fail(off, "invalid \\u escape")
		}
		p.pos += 6
		if utf16.IsSurrogate(r) {
			if r >= 0xDC00 {
				return p.fail(off, "unpaired surrogate escape")
			}
			lo, ok := rune(0), false
			if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
				lo, ok = hex4(p.data[p.pos+2:])
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return p.fail(off, "unpaired surrogate escape")
			}
			r = utf16.DecodeRune(r, lo)
			p.pos += 6
		}
		p.arena = utf8.AppendRune(p.arena, r)
		return nil
	default:
		return p.fail(off, "invalid escape character in string")
	}
	p.arena = append(p.arena, b)
	p.pos += 2
	return nil
}

// handStr is str with handStrSlow.
func (p *parser) handStr() (span, error) {
	p.pos++ // '"'
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := span{start: int32(start), end: int32(p.pos)}
			p.pos++
			return s, nil
		case c == '\\':
			return p.handStrSlow(start)
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

// FuzzStrMatchesHand compares str, which decodes escapes with jsontext,
// with the hand-written decoder: the same strings refused, and for the
// others the same contents and the same end, followed by more input or
// not.
func FuzzStrMatchesHand(f *testing.F) {
	for _, s := range []string{``, `a`, `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\u0000`, `\u00E9x`, `\ud83d\ude00`, `\ud800`,
		`\udc00`, `\ud800\u0041`, `\ud800x`, `\ude00\ud83d`, `\x`, `\u12`, `\u12g4`, "a\x01b", "\\n\xff", "\\té😀",
		`\u00`, `\`, `\ud83d\ude0`, "\\\"\"", `\\\\\"`, "\\u2028\n\x7f"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, contents []byte, more bool) {
		in := append([]byte{'"'}, contents...)
		in = append(in, '"')
		if more {
			in = append(in, `,"x"]`...)
		}
		got := &parser{data: in}
		gotS, err := got.str()
		want := &parser{data: in}
		wantS, wantErr := want.handStr()
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: str error %v, hand-written %v", in, err, wantErr)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(in) {
				t.Fatalf("%q: error %v", in, err)
			}
			return
		}
		if !bytes.Equal(got.bytes(gotS), want.bytes(wantS)) || got.pos != want.pos {
			t.Fatalf("%q: str = %q ending at %d, hand-written %q at %d", in, got.bytes(gotS), got.pos, want.bytes(wantS), want.pos)
		}
	})
}
