package canonjson

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Structure, order, whitespace.
		{"rfc8785 example", `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{"key order", `{"b":1,"a":2,"c":{"z":1,"y":[3,2,1]}}`, `{"a":2,"b":1,"c":{"y":[3,2,1],"z":1}}`},
		{"key prefix sorts first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"whitespace", " \t\r\n{ \"a\" :\n[ 1 ,\t2 ] , \"b\" : { } , \"c\" : [ ] }\n ", `{"a":[1,2],"b":{},"c":[]}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"scalar top level", ` "x" `, `"x"`},
		{"nested arrays keep order", `[[3,[2]],[1],{"b":[{"d":0,"c":1}]}]`, `[[3,[2]],[1],{"b":[{"c":1,"d":0}]}]`},
		{"empty containers", `[{},[],{"a":{}}]`, `[{},[],{"a":{}}]`},

		// Strings.
		{"escapes decoded", `"\u00e9\/\u0041\t"`, `"é/A\t"`},
		{"literal utf8", `"é"`, `"é"`},
		{"short escapes kept", `"\"\\\b\f\n\r\t"`, `"\"\\\b\f\n\r\t"`},
		{"control as u00xx lowercase", `"\u0000\u0001\u001F\u000B"`, `"\u0000\u0001\u001f\u000b"`},
		{"no html or line separator escaping", `"<>&\u2028\u2029/\u007f"`, "\"<>&\u2028\u2029/\x7f\""},
		{"surrogate pair", `"\ud83d\ude00 \uD83D\uDE00"`, `"😀 😀"`},
		{"escaped key", `{"\u0061":1}`, `{"a":1}`},
		{"uppercase hex", `"\u00C9"`, `"É"`},

		// Numbers: integers exact.
		{"integers exact", `[0,-0,1,-1,9007199254740992,9007199254740993,12345678901234567891,12345678901234567892]`,
			`[0,0,1,-1,9007199254740992,9007199254740993,12345678901234567891,12345678901234567892]`},
		{"huge integer", `123456789012345678901234567890123456789012345678901234567890`, `123456789012345678901234567890123456789012345678901234567890`},
		{"huge negative integer", `-123456789012345678901234567890`, `-123456789012345678901234567890`},

		// Numbers: floats in ECMAScript form.
		{"float 1e21", `1e21`, `1e+21`},
		{"float 1e-7", `1e-7`, `1e-7`},
		{"float 0.000001", `0.000001`, `0.000001`},
		{"float 100.0", `100.0`, `100`},
		{"float 1.5E2", `1.5E2`, `150`},
		{"float 1e2", `1e2`, `100`},
		{"float 1E+2", `1E+2`, `100`},
		{"float 4.50", `4.50`, `4.5`},
		{"float -0.0", `-0.0`, `0`},
		{"float -0e5", `-0e5`, `0`},
		{"float 0.1", `0.10`, `0.1`},
		{"float negative", `-2.5e-3`, `-0.0025`},
		{"float 1e-6", `1e-6`, `0.000001`},
		{"float 123e-8", `123e-8`, `0.00000123`},
		{"float 1e20", `1e20`, `100000000000000000000`},
		{"float 9.007199254740992e15", `9.007199254740992e15`, `9007199254740992`},
		{"float max", `1.7976931348623157e308`, `1.7976931348623157e+308`},
		{"float min subnormal", `5e-324`, `5e-324`},
		{"float underflow is zero", `1e-400`, `0`},
		{"float excess precision", `0.10000000000000000001`, `0.1`},
		{"float rounding", `333333333.33333329`, `333333333.3333333`},
		// Departure from RFC 8785: integral floats >= 2^53 whose plain form
		// would not be their exact value.
		{"float 2^60 not as integer", `1152921504606846976.0`, `1.152921504606847e+18`},
		{"float 2^68 not as integer", `295147905179352825856e0`, `2.9514790517935283e+20`},
		{"float 12345678901234567891.0", `12345678901234567891.0`, `1.2345678901234567e+19`},
		{"float 2^54 exact stays plain", `18014398509481984.0`, `18014398509481984`},
		{"float 1e17 exact stays plain", `1e17`, `100000000000000000`},

		// Typical request.
		{"chat request", `{
  "model": "gpt-4o",
  "stream": true,
  "messages": [{"role": "user", "content": "Hi \u2014 \"there\"\n"}],
  "temperature": 0.70,
  "seed": 12345678901234567891
}`, `{"messages":[{"content":"Hi — \"there\"\n","role":"user"}],"model":"gpt-4o","seed":12345678901234567891,"stream":true,"temperature":0.7}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Canonicalize(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if !json.Valid(got) {
				t.Errorf("output %q is not valid JSON", got)
			}
		})
	}
}

// TestSameCanonicalForm checks inputs that must fingerprint alike.
func TestSameCanonicalForm(t *testing.T) {
	groups := [][]string{
		{`{"a":1,"b":[true,null]}`, `{"b":[true,null],"a":1}`, "{ \"b\" : [ true , null ] ,\n\"a\":1 }"},
		{`"é"`, `"\u00e9"`, `"\u00E9"`},
		{`"/"`, `"\/"`, `"\u002f"`},
		{`"😀"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`},
		{`100`, `1e2`, `100.0`, `1.00e+2`, `10000e-2`},
		{`0`, `-0`, `0.0`, `-0.0`, `0e10`},
		{`0.5`, `5e-1`, `0.50`, `50E-2`},
		{`12345678901234567891`}, // integers have one spelling
	}
	for _, g := range groups {
		want, err := Canonicalize([]byte(g[0]))
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", g[0], err)
		}
		for _, in := range g[1:] {
			got, err := Canonicalize([]byte(in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", in, err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("Canonicalize(%q) differs from Canonicalize(%q) (-want +got):\n%s", in, g[0], diff)
			}
		}
	}
}

// TestDifferentCanonicalForm checks inputs that must not fingerprint alike.
func TestDifferentCanonicalForm(t *testing.T) {
	pairs := [][2]string{
		{`12345678901234567891`, `12345678901234567892`},
		{`9007199254740993`, `9007199254740992`},
		{`1152921504606847000`, `1152921504606846976.0`}, // see the RFC departure
		{`12345678901234567000`, `12345678901234567891.0`},
		{`1`, `"1"`},
		{`[1,2]`, `[2,1]`},
		{`{"a":"b"}`, `{"b":"a"}`},
		{`"a\u0000"`, `"a"`},
		{`"\u00e9"`, `"e\u0301"`}, // no Unicode normalization
		{`null`, `{}`},
		{`{}`, `[]`},
		{`0.1`, `0.10000000000000002`},
	}
	for _, p := range pairs {
		a, err := Canonicalize([]byte(p[0]))
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", p[0], err)
		}
		b, err := Canonicalize([]byte(p[1]))
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", p[1], err)
		}
		if string(a) == string(b) {
			t.Errorf("Canonicalize(%q) == Canonicalize(%q) == %q", p[0], p[1], a)
		}
	}
}

func TestKeyOrderUTF16(t *testing.T) {
	// U+FB01 is EF AC 81 in UTF-8 and FB01 in UTF-16; U+1F600 is F0 9F 98 80
	// in UTF-8 and D83D DE00 in UTF-16. Byte order puts U+FB01 first,
	// UTF-16 order puts U+1F600 first.
	in := `{"\ufb01":1,"\ud83d\ude00":2}`
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"\U0001F600\":2,\"\uFB01\":1}"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}

	// RFC 8785 section 3.2.3 example.
	in = `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	got, err = Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(strings.NewReader(string(got)))
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if s, ok := tok.(string); ok && !strings.Contains(s, " ") && s != "One" && s != "Control" {
			keys = append(keys, s)
		}
	}
	wantKeys := []string{"\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001F600", "\ufb33"}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Errorf("key order mismatch (-want +got):\n%s", diff)
	}
}

func TestCompareUTF16(t *testing.T) {
	strs := []string{"", "a", "ab", "b", "\u007f", "\u0080", "\u07ff", "\u0800", "\ud7ff", "\ue000",
		"\ufb01", "\uffff", "\U00010000", "\U0001F600", "\U0001F601", "\U0010FFFF", "a\U0001F600", "a\uffff"}
	ref := func(a, b string) int {
		ua, ub := utf16Of(a), utf16Of(b)
		for i := 0; i < len(ua) && i < len(ub); i++ {
			if ua[i] != ub[i] {
				return int(ua[i]) - int(ub[i])
			}
		}
		return len(ua) - len(ub)
	}
	for _, a := range strs {
		for _, b := range strs {
			got, want := sign(compareUTF16([]byte(a), []byte(b))), sign(ref(a, b))
			if got != want {
				t.Errorf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func TestErrors(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ``},
		{"only whitespace", ` `},
		{"trailing data", `{} {}`},
		{"trailing garbage", `1 x`},
		{"trailing comma array", `[1,]`},
		{"trailing comma object", `{"a":1,}`},
		{"missing colon", `{"a" 1}`},
		{"unquoted key", `{a:1}`},
		{"single quotes", `'a'`},
		{"unterminated string", `"abc`},
		{"unterminated array", `[1`},
		{"unterminated object", `{"a":1`},
		{"raw control char", "\"a\nb\""},
		{"raw tab", "\"a\tb\""},
		{"bad escape", `"\x41"`},
		{"short unicode escape", `"\u12"`},
		{"bad hex", `"\u12g4"`},
		{"leading zero", `01`},
		{"leading plus", `+1`},
		{"bare minus", `-`},
		{"bare dot", `.5`},
		{"trailing dot", `1.`},
		{"empty exponent", `1e`},
		{"exponent sign only", `1e+`},
		{"NaN", `NaN`},
		{"Infinity", `Infinity`},
		{"hex number", `0x10`},
		{"bad literal", `tru`},
		{"literal case", `True`},
		{"BOM", "\ufeff{}"},
		{"comment", `{} // x`},
		{"nul outside", "{}\x00"},
		// Documented extra rejections (encoding/json accepts these).
		{"duplicate key", `{"a":1,"a":1}`},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`},
		{"nested duplicate key", `[{"x":{"b":1,"c":2,"b":3}}]`},
		{"invalid utf8", "\"\xff\""},
		{"invalid utf8 in key", "{\"\xc3\":1}"},
		{"truncated utf8", "\"\xe2\x82\""},
		{"overlong utf8", "\"\xc0\xaf\""},
		{"utf8 surrogate", "\"\xed\xa0\x80\""},
		{"lone high surrogate", `"\ud800"`},
		{"lone high surrogate then char", `"\ud800x"`},
		{"high surrogate then high", `"\ud800\ud800"`},
		{"high surrogate then bmp escape", `"\ud800\u0041"`},
		{"lone low surrogate", `"\udc00"`},
		{"reversed pair", `"\ude00\ud83d"`},
		{"float overflow", `1e400`},
		{"negative float overflow", `-1.8e308`},
		{"too deep array", deep(MaxDepth + 1)},
		{"too deep object", deepObj(MaxDepth + 1)},
		{"very deep", deep(100000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want error", tt.in, got)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is %T, want *Error", err, err)
			}
			if e.Offset < 0 || e.Offset > len(tt.in) {
				t.Errorf("offset %d outside input of length %d", e.Offset, len(tt.in))
			}
			if _, err := CanonicalizeWithout([]byte(tt.in), "a", "b"); err == nil {
				t.Errorf("CanonicalizeWithout(%q) succeeded, want error", tt.in)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	in := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	if string(got) != in {
		t.Errorf("depth %d: got %q", MaxDepth, got)
	}
	in = strings.Repeat(`{"k":`, MaxDepth) + "null" + strings.Repeat("}", MaxDepth)
	if _, err := Canonicalize([]byte(in)); err != nil {
		t.Fatalf("object depth %d: %v", MaxDepth, err)
	}
}

func TestErrorMessage(t *testing.T) {
	_, err := Canonicalize([]byte(`{"a":1,"a":2}`))
	want := `canonjson: duplicate object member name "a" at offset 7`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestCanonicalizeWithout(t *testing.T) {
	so := []string{"stream_options", "include_usage"}
	tests := []struct {
		name string
		in   string
		path []string
		want string
	}{
		{"removes member and emptied parent", `{"a":1,"stream_options":{"include_usage":true}}`, so, `{"a":1}`},
		{"same as absent", `{"a":1}`, so, `{"a":1}`},
		{"keeps other members", `{"stream_options":{"include_usage":true,"x":1}}`, so, `{"stream_options":{"x":1}}`},
		{"removes client empty parent", `{"a":1,"stream_options":{}}`, so, `{"a":1}`},
		{"include_usage false also removed", `{"stream_options":{"include_usage":false},"a":1}`, so, `{"a":1}`},
		{"parent not object", `{"stream_options":null,"a":1}`, so, `{"a":1,"stream_options":null}`},
		{"parent is array", `{"stream_options":[{"include_usage":true}]}`, so, `{"stream_options":[{"include_usage":true}]}`},
		{"top level not object", `[{"stream_options":{"include_usage":true}}]`, so, `[{"stream_options":{"include_usage":true}}]`},
		{"only top-level chain", `{"x":{"stream_options":{"include_usage":true}}}`, so, `{"x":{"stream_options":{"include_usage":true}}}`},
		{"unrelated parent member kept", `{"stream_options":{"x":{}}}`, so, `{"stream_options":{"x":{}}}`},
		{"escaped names match", `{"stream_options":{"include\u005fusage":1}}`, so, `{}`},
		{"single element path", `{"a":1,"b":{}}`, []string{"b"}, `{"a":1}`},
		{"single element path absent", `{"a":1}`, []string{"b"}, `{"a":1}`},
		{"top level object kept when emptied", `{"b":1}`, []string{"b"}, `{}`},
		{"empty path", `{"b":{} , "a":1}`, nil, `{"a":1,"b":{}}`},
		{"deep cascade", `{"a":{"b":{"c":1}},"z":0}`, []string{"a", "b", "c"}, `{"z":0}`},
		{"deep cascade stops at non-empty", `{"a":{"b":{"c":1},"k":2}}`, []string{"a", "b", "c"}, `{"a":{"k":2}}`},
		{"deep absent prunes empty", `{"a":{"b":{}}}`, []string{"a", "b", "c"}, `{}`},
		{"deep intermediate not object", `{"a":{"b":5}}`, []string{"a", "b", "c"}, `{"a":{"b":5}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalizeWithout([]byte(tt.in), tt.path...)
			if err != nil {
				t.Fatalf("CanonicalizeWithout(%q, %q): %v", tt.in, tt.path, err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("CanonicalizeWithout(%q, %q) mismatch (-want +got):\n%s", tt.in, tt.path, diff)
			}
		})
	}

	// The headline property: the two requests fingerprint alike.
	a, _ := CanonicalizeWithout([]byte(`{"a":1,"stream_options":{"include_usage":true}}`), so...)
	b, _ := CanonicalizeWithout([]byte(`{"a":1}`), so...)
	if string(a) != string(b) {
		t.Errorf("with and without stream_options differ: %q vs %q", a, b)
	}
}

// TestESNumberFormat checks the ECMAScript formatting against RFC 8785
// Appendix B.
func TestESNumberFormat(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		if got := string(appendES(nil, f, false)); got != tt.want {
			t.Errorf("appendES(%016x) = %s, want %s", tt.bits, got, tt.want)
		}
		// Through Canonicalize, from a float literal of the same value.
		lit := strconv.FormatFloat(f, 'e', -1, 64)
		got, err := Canonicalize([]byte(lit))
		if err != nil {
			t.Fatalf("Canonicalize(%s): %v", lit, err)
		}
		want := tt.want
		if a := math.Abs(f); a >= 1<<53 && a < 1e21 && strings.TrimPrefix(want, "-") != strconv.FormatFloat(a, 'f', 0, 64) {
			want = esReference(f, true) // the documented departure
		}
		if string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, want %s", lit, got, want)
		}
	}
}

// esReference formats f as ECMAScript does, by a route independent of
// appendES: in the plain range, strconv's shortest 'f' form is exactly the
// ECMAScript form; outside it, the shortest 'e' form with the exponent's
// leading zeros dropped.
func esReference(f float64, forceExp bool) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); !forceExp && a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	i := strings.IndexByte(s, 'e')
	exp := strings.TrimLeft(s[i+2:], "0")
	if exp == "" {
		exp = "0"
	}
	return s[:i+2] + exp
}

func TestESNumberFormatRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(f float64) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return
		}
		if got, want := string(appendES(nil, f, false)), esReference(f, false); got != want {
			t.Fatalf("appendES(%v [%016x]) = %s, want %s", f, math.Float64bits(f), got, want)
		}
		if got, want := string(appendES(nil, f, true)), esReference(f, true); got != want {
			t.Fatalf("appendES(%v [%016x], forceExp) = %s, want %s", f, math.Float64bits(f), got, want)
		}
	}
	for range 200000 {
		check(math.Float64frombits(rng.Uint64()))
		// Values near the layout boundaries.
		e := rng.IntN(60) - 30
		check(math.Pow10(e) * (1 + (rng.Float64()-0.5)*1e-15))
		check(float64(rng.Int64N(1<<62)) * math.Pow10(rng.IntN(8)))
	}
	for _, f := range []float64{1e21, 1e-6, 1e-7, 999999999999999999999, 0.000001, 0.0000009999999999999999} {
		check(f)
		check(-f)
	}
}

// TestRandomRequests generates random JSON values, writes each in two
// random ways (key order, whitespace, escaping, float spelling), and checks
// that both canonicalize to the same bytes, that the result matches the
// encoding/json based reference, is valid JSON, and is a fixed point.
func TestRandomRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		v := genValue(rng, 0)
		a := render(rng, v)
		b := render(rng, v)
		ca, err := Canonicalize([]byte(a))
		if err != nil {
			t.Fatalf("#%d Canonicalize(%q): %v", i, a, err)
		}
		cb, err := Canonicalize([]byte(b))
		if err != nil {
			t.Fatalf("#%d Canonicalize(%q): %v", i, b, err)
		}
		if diff := cmp.Diff(string(ca), string(cb)); diff != "" {
			t.Fatalf("#%d two spellings of one value differ:\n%q\n%q\n(-a +b):\n%s", i, a, b, diff)
		}
		if !json.Valid(ca) || !utf8.Valid(ca) {
			t.Fatalf("#%d invalid output %q", i, ca)
		}
		if ref := refCanonicalize(t, []byte(a)); ref != string(ca) {
			t.Fatalf("#%d Canonicalize(%q) = %q, reference %q", i, a, ca, ref)
		}
		again, err := Canonicalize(ca)
		if err != nil || string(again) != string(ca) {
			t.Fatalf("#%d not idempotent: %q -> %q, %v", i, ca, again, err)
		}
		if !sameJSON(t, []byte(a), ca) {
			t.Fatalf("#%d output %q does not denote input %q", i, ca, a)
		}
	}
}

// gen is a generated JSON value.
type gen struct {
	kind  kind
	num   string  // integer literal
	f     float64 // float, when kind == kindNumber && num == ""
	s     string
	elems []gen
	names []string
}

func genValue(rng *rand.Rand, depth int) gen {
	n := 9
	if depth > 4 {
		n = 5 // scalars only
	}
	switch rng.IntN(n) {
	case 0:
		return gen{kind: kindNull}
	case 1:
		return gen{kind: [2]kind{kindTrue, kindFalse}[rng.IntN(2)]}
	case 2:
		return gen{kind: kindNumber, num: genInt(rng)}
	case 3:
		return gen{kind: kindNumber, f: genFloat(rng)}
	case 4:
		return gen{kind: kindString, s: genString(rng)}
	case 5, 6:
		v := gen{kind: kindArray}
		for range rng.IntN(5) {
			v.elems = append(v.elems, genValue(rng, depth+1))
		}
		return v
	default:
		v := gen{kind: kindObject}
		seen := map[string]bool{}
		for range rng.IntN(6) {
			name := genString(rng)
			if seen[name] {
				continue
			}
			seen[name] = true
			v.names = append(v.names, name)
			v.elems = append(v.elems, genValue(rng, depth+1))
		}
		return v
	}
}

func genInt(rng *rand.Rand) string {
	switch rng.IntN(5) {
	case 0:
		return [...]string{"0", "-0", "1", "-1", "9007199254740993", "12345678901234567891"}[rng.IntN(6)]
	case 1:
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(byte('1' + rng.IntN(9)))
		for range rng.IntN(40) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		return b.String()
	default:
		return strconv.FormatInt(rng.Int64N(2000)-1000, 10)
	}
}

func genFloat(rng *rand.Rand) float64 {
	switch rng.IntN(4) {
	case 0:
		for {
			f := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	case 1:
		return [...]float64{0, math.Copysign(0, -1), 0.1, 1e21, 1e-7, 1e-6, 100, 0.7, 1 << 60, 5e-324}[rng.IntN(10)]
	default:
		return float64(rng.IntN(2000)-1000) / 100 * math.Pow10(rng.IntN(10)-5)
	}
}

var genRunes = []rune{'a', 'b', 'z', 'A', '0', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f,
	'<', '>', '&', 0x80, 0xe9, 0x2028, 0x2029, 0xd7ff, 0xe000, 0xfb01, 0xfeff, 0xffff, 0x10000, 0x1f600, 0x10ffff}

func genString(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteRune(genRunes[rng.IntN(len(genRunes))])
	}
	return b.String()
}

// render writes v as JSON text in a randomly chosen spelling.
func render(rng *rand.Rand, v gen) string {
	var b strings.Builder
	renderTo(&b, rng, v)
	return b.String()
}

func ws(b *strings.Builder, rng *rand.Rand) {
	for range rng.IntN(3) / 2 * rng.IntN(3) {
		b.WriteByte(" \t\n\r"[rng.IntN(4)])
	}
}

func renderTo(b *strings.Builder, rng *rand.Rand, v gen) {
	ws(b, rng)
	switch v.kind {
	case kindNull:
		b.WriteString("null")
	case kindTrue:
		b.WriteString("true")
	case kindFalse:
		b.WriteString("false")
	case kindNumber:
		if v.num != "" {
			b.WriteString(v.num)
		} else {
			b.WriteString(renderFloat(rng, v.f))
		}
	case kindString:
		renderString(b, rng, v.s)
	case kindArray:
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			renderTo(b, rng, e)
		}
		ws(b, rng)
		b.WriteByte(']')
	case kindObject:
		b.WriteByte('{')
		for i, j := range rng.Perm(len(v.elems)) {
			if i > 0 {
				b.WriteByte(',')
			}
			ws(b, rng)
			renderString(b, rng, v.names[j])
			ws(b, rng)
			b.WriteByte(':')
			renderTo(b, rng, v.elems[j])
		}
		ws(b, rng)
		b.WriteByte('}')
	}
	ws(b, rng)
}

// renderFloat spells f as a JSON number with a fraction or an exponent,
// so that it reads as a float.
func renderFloat(rng *rand.Rand, f float64) string {
	var s string
	switch rng.IntN(5) {
	case 0:
		s = strconv.FormatFloat(f, 'e', -1, 64)
	case 1:
		s = strings.Replace(strconv.FormatFloat(f, 'e', -1, 64), "e+", "E", 1)
	case 2:
		s = strconv.FormatFloat(f, 'e', 25, 64) // more digits than needed
	case 3:
		s = strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".000"
		}
	default:
		m, e, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
		if !strings.Contains(m, ".") {
			m += ".0"
		}
		s = m + "0e" + e
	}
	return s
}

func renderString(b *strings.Builder, rng *rand.Rand, s string) {
	b.WriteByte('"')
	for _, r := range s {
		esc := rng.IntN(3) == 0
		switch {
		case r == '"' || r == '\\' || r < 0x20 || esc:
			if short, ok := shortEscapes[r]; ok && rng.IntN(2) == 0 {
				b.WriteString(short)
			} else if r >= 0x10000 {
				hi, lo := utf16Pair(r)
				b.WriteString(hexEscape(rng, hi) + hexEscape(rng, lo))
			} else {
				b.WriteString(hexEscape(rng, r))
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

var shortEscapes = map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}

func hexEscape(rng *rand.Rand, r rune) string {
	h := strconv.FormatInt(int64(r)+0x10000, 16)[1:]
	if rng.IntN(2) == 0 {
		h = strings.ToUpper(h)
	}
	return `\u` + h
}

func utf16Pair(r rune) (rune, rune) {
	u := utf16Of(string(r))
	return rune(u[0]), rune(u[1])
}

// benchRequest is a typical ~2 KB chat completion request.
var benchRequest = []byte(`{
  "model": "gpt-4o-mini",
  "messages": [
    {"role": "system", "content": "You are a helpful assistant for an online bookshop. Answer briefly, cite the catalogue entry when you mention a book, and never invent ISBNs. If the user asks for something unrelated to books, politely steer the conversation back."},
    {"role": "user", "content": "Hi! I'm looking for a novel similar to \"The Name of the Rose\" \u2014 a historical mystery, ideally set in a monastery or a library. Something not too long, please."},
    {"role": "assistant", "content": "You might enjoy \"An Instance of the Fingerpost\" by Iain Pears (Oxford, 1663), or \"The Shadow of the Wind\" by Carlos Ruiz Zaf\u00f3n, which revolves around a secret library in Barcelona.\nWould you like availability for either?"},
    {"role": "user", "content": "Yes, check both please, and tell me the price in \u20ac. Also: is there a Spanish edition of the second one?"}
  ],
  "temperature": 0.7,
  "top_p": 1,
  "max_tokens": 1024,
  "seed": 12345678901234567891,
  "stream": true,
  "stream_options": {"include_usage": true},
  "user": "user-8f14e45f-ceea-467f-a8ad-9b4c6d2a3f10",
  "tools": [
    {
      "type": "function",
      "function": {
        "name": "check_availability",
        "description": "Look up stock and price for a book in the shop catalogue.",
        "parameters": {
          "type": "object",
          "properties": {
            "title": {"type": "string", "description": "Book title, as precise as possible"},
            "author": {"type": "string", "description": "Author name"},
            "language": {"type": "string", "enum": ["en", "es", "fr", "de", "it"], "description": "Edition language (ISO 639-1)"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 10}
          },
          "required": ["title"],
          "additionalProperties": false
        }
      }
    }
  ],
  "tool_choice": "auto",
  "response_format": {"type": "text"},
  "metadata": {"tenant": "bookshop-eu", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
}`)

func BenchmarkCanonicalize(b *testing.B) {
	b.Run("Canonicalize", func(b *testing.B) {
		b.SetBytes(int64(len(benchRequest)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Canonicalize(benchRequest); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CanonicalizeWithout", func(b *testing.B) {
		b.SetBytes(int64(len(benchRequest)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := CanonicalizeWithout(benchRequest, "stream_options", "include_usage"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A coding agent's 1 MB body: long texts with escapes and non-ASCII.
	large := benchbody.Chat("m", 1<<20, `"max_tokens":128`)
	// The same written by encoding/json, which escapes <, > and & as \u003c
	// and so on: those strings are copied into canonical form.
	var v any
	if err := json.Unmarshal(large, &v); err != nil {
		b.Fatal(err)
	}
	escaped, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
	}{{"CanonicalizeWithout-1MB", large}, {"CanonicalizeWithout-1MB-escaped", escaped}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CanonicalizeWithout(c.body, "stream_options", "include_usage"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// For scale: what a plain encoding/json round trip costs.
	b.Run("baseline-json-Unmarshal-Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(benchRequest)))
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := json.Unmarshal(benchRequest, &v); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLargeInputUTF8: an input large enough to have its UTF-8 checked apart
// gives the same form, and for invalid UTF-8 the same error, as one parse
// that checks each string itself.
func TestLargeInputUTF8(t *testing.T) {
	body := benchbody.Chat("m", 1<<20, `"max_tokens":128`)
	if len(body) < checkUTF8Apart {
		t.Fatalf("body of %d bytes is not checked apart", len(body))
	}
	once := func(data []byte) ([]byte, error) {
		p := new(parser)
		root, err := p.parseOnce(data)
		if err != nil {
			return nil, err
		}
		o := out{}
		p.write(&o, &root)
		return o.buf, nil
	}
	content := strings.Index(string(body), `"content":"`) + len(`"content":"`)
	// A message's content past the middle whose first 16 bytes are
	// letters and spaces, for the edits.
	last := len(body) / 2
	for {
		last += strings.Index(string(body[last:]), `"content":"`) + len(`"content":"`)
		if strings.Trim(string(body[last:last+16]), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ") == "" {
			break
		}
	}
	key := strings.Index(string(body), `"max_tokens"`) + 1
	cases := []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"valid", func(b []byte) []byte { return b }},
		{"bad byte in first content", func(b []byte) []byte { b[content+3] = 0xff; return b }},
		{"bad byte in last content", func(b []byte) []byte { b[last+6] = 0xc3; b[last+7] = 'a'; return b }},
		{"bad byte in a member name", func(b []byte) []byte { b[key+2] = 0xfe; return b }},
		{"surrogate encoded in UTF-8", func(b []byte) []byte { copy(b[last+10:], "\xed\xa0\x80"); return b }},
		{"bad byte, then a syntax error", func(b []byte) []byte {
			b[last+5] = 0xff
			b[len(b)-1] = ','
			return b
		}},
		{"syntax error, then a bad byte", func(b []byte) []byte {
			b[content-2] = ';'
			b[last+5] = 0xff
			return b
		}},
		{"bad byte outside strings", func(b []byte) []byte { b[key-2] = 0x80; return b }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.edit(append([]byte(nil), body...))
			want, wantErr := once(in)
			got, err := Canonicalize(in)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("error %v, want %v", err, wantErr)
			}
			if string(got) != string(want) {
				t.Fatalf("form differs from one parse's (%d against %d bytes)", len(got), len(want))
			}
			if c.name != "valid" && err == nil {
				t.Fatal("no error")
			}
		})
	}
}
