package canonjson

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
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
