package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	``, ` `, `null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `0.5`, `1e2`, `1E+2`, `-0.0`, `1e400`, `1e-400`,
	`12345678901234567891`, `1152921504606846976.0`, `9007199254740993`, `5e-324`, `1.7976931348623157e308`,
	`"a"`, `"\u00e9"`, `"é"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, "\"\xff\"", `"\/\b\f\n\r\t\"\\"`,
	"\"\u2028<>&\x7f\"", `"\u0000"`, `[]`, `{}`, `[1,[2,[3]]]`, `{"a":1,"b":2}`, `{"b":2,"a":1}`,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\ufb01":1,"\ud83d\ude00":2}`, `{"a":{"b":true,"c":1}}`,
	`{"a":{"b":true}}`, `{"a":{}}`, `{"a":[{"b":1}]}`, ` [ 1 , 2 ] `, `[1,]`, `{"a" 1}`, `01`, `1.`, `.5`,
	`{} {}`, `[` + strings.Repeat(`[`, 1001) + strings.Repeat(`]`, 1001) + `]`,
	string(benchRequest),
}

// FuzzCanonicalize checks that Canonicalize fails exactly when the input is
// not valid JSON or hits a documented extra rejection, and that on success
// the output is valid, a fixed point, denotes the same value as the input,
// and equals an independent encoding/json based canonicalization. It checks
// CanonicalizeWithout against a reference removal the same way.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Canonicalize(data)
		valid := json.Valid(data)
		extra := ""
		if valid {
			extra = extraRejection(t, data)
		}
		if wantErr := !valid || extra != ""; (err != nil) != wantErr {
			t.Fatalf("Canonicalize(%q) error = %v; json.Valid = %v, extra rejection = %q", data, err, valid, extra)
		}
		without, errWithout := CanonicalizeWithout(data, "a", "b")
		if (errWithout != nil) != (err != nil) {
			t.Fatalf("CanonicalizeWithout(%q) error = %v, Canonicalize error = %v", data, errWithout, err)
		}
		// WriteWithout writes the same form in pieces, after its length.
		var written bytes.Buffer
		length := -1
		errWrite := WriteWithout(&written, func(n int) { length = n }, data, "a", "b")
		switch {
		case errWithout != nil:
			if errWrite == nil || errWrite.Error() != errWithout.Error() || written.Len() != 0 || length != -1 {
				t.Fatalf("WriteWithout(%q) = %v after %q (length %d), CanonicalizeWithout error = %v", data, errWrite, written.Bytes(), length, errWithout)
			}
		case errWrite != nil || !bytes.Equal(written.Bytes(), without) || length != len(without):
			t.Fatalf("WriteWithout(%q) = %q, %v (length %d), CanonicalizeWithout %q", data, written.Bytes(), errWrite, length, without)
		}
		if err != nil {
			return
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q, not valid JSON/UTF-8", data, out)
		}
		if ref := refCanonicalize(t, data); string(out) != ref {
			t.Fatalf("Canonicalize(%q) = %q, reference %q", data, out, ref)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: Canonicalize(%q) = %q, %v", out, again, err)
		}
		if !sameJSON(t, data, out) {
			t.Fatalf("Canonicalize(%q) = %q denotes another value", data, out)
		}

		ref := refWithout(decodeJSON(t, data), "a", "b")
		var b strings.Builder
		refWrite(&b, ref)
		if string(without) != b.String() {
			t.Fatalf("CanonicalizeWithout(%q, a, b) = %q, reference %q", data, without, b.String())
		}
	})
}

// FuzzCollision checks that two inputs with equal canonical forms denote the
// same value: integers compared exactly, float literals as their float64
// values, strings as decoded text. Besides the two inputs themselves, the
// elements of each input that is an array are compared pairwise, which
// gives the fuzzer many near-identical pairs to work with.
func FuzzCollision(f *testing.F) {
	pairs := [][2]string{
		{`1`, `1.0`}, {`100`, `1e2`}, {`0`, `-0`}, {`0`, `-0.0`}, {`0`, `1e-400`}, {`0.1`, `0.10000000000000001`},
		{`12345678901234567891`, `12345678901234567892`}, {`12345678901234567000`, `12345678901234567891.0`},
		{`1152921504606847000`, `1152921504606846976.0`}, {`9007199254740992`, `9007199254740992.0`},
		{`9007199254740993`, `9007199254740993.0`}, {`1e21`, `1000000000000000000000`},
		{`"\u00e9"`, `"é"`}, {`"\ud83d\ude00"`, "\"\U0001F600\""}, {`"\ud800"`, `"\ufffd"`}, {"\"\xff\"", `"\ufffd"`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`}, {`{"a":1,"a":2}`, `{"a":2}`}, {`[1,2]`, `[2,1]`},
		{`{"a":{"b":1}}`, `{"a":{"b":1.0}}`},
	}
	for _, p := range pairs {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Add([]byte(`[1,1.0,1e0,100,1e2,100.0,0,-0,-0.0,1e-400,12345678901234567891,12345678901234567892,1152921504606847000,1152921504606846976.0]`),
		[]byte(`["é","\u00e9","e\u0301",{"a":1,"b":[1]},{"b":[1.0],"a":1e0},"\ud83d\ude00","\ufb01"]`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		type item struct {
			in, canon []byte
			v         any
		}
		var items []item
		add := func(in []byte) {
			if len(items) >= 40 {
				return
			}
			if c, err := Canonicalize(in); err == nil {
				items = append(items, item{in, c, decodeJSON(t, in)})
			}
		}
		add(a)
		add(b)
		for _, in := range [][]byte{a, b} {
			var elems []json.RawMessage
			if json.Unmarshal(in, &elems) == nil {
				for _, e := range elems {
					add(e)
				}
			}
		}
		for i := range items {
			for j := i + 1; j < len(items); j++ {
				x, y := items[i], items[j]
				same := sameValue(x.v, y.v)
				if bytes.Equal(x.canon, y.canon) && !same {
					t.Fatalf("different values collide: %q and %q both canonicalize to %q", x.in, y.in, x.canon)
				}
				// The converse holds too, except for numbers the canonical
				// form keeps apart on purpose (integers vs floats >= 2^53).
				if !bytes.Equal(x.canon, y.canon) && same && !hasBigNumber(x.v) {
					t.Fatalf("equal values separated: %q -> %q, %q -> %q", x.in, x.canon, y.in, y.canon)
				}
			}
		}
	})
}

// extraRejection reports which documented extra rejection, if any, applies
// to data, which json.Valid accepts. It is written independently of the
// parser under test.
func extraRejection(t *testing.T, data []byte) string {
	if !utf8.Valid(data) {
		return "invalid UTF-8"
	}
	// Raw scan for unpaired surrogate escapes and nesting depth; data is
	// valid JSON, so the string/non-string state is easy to track.
	inString := false
	depth := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			switch c {
			case '"':
				inString = true
			case '[', '{':
				depth++
				if depth > MaxDepth {
					return "too deep"
				}
			case ']', '}':
				depth--
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			i++
			if data[i] != 'u' {
				continue
			}
			r, _ := strconv.ParseUint(string(data[i+1:i+5]), 16, 32)
			i += 4
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return "unpaired low surrogate"
			case r >= 0xD800 && r <= 0xDBFF:
				if i+6 >= len(data) || data[i+1] != '\\' || data[i+2] != 'u' {
					return "unpaired high surrogate"
				}
				lo, err := strconv.ParseUint(string(data[i+3:i+7]), 16, 32)
				if err != nil || lo < 0xDC00 || lo > 0xDFFF {
					return "unpaired high surrogate"
				}
				i += 6
			}
		}
	}
	// Token walk for duplicate names and float overflow.
	type frame struct {
		obj       bool
		expectKey bool
		names     map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			t.Fatalf("json.Valid(%q) but Token: %v", data, err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				stack = append(stack, &frame{obj: tok == '{', expectKey: true, names: map[string]bool{}})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.expectKey {
				if top.names[tok] {
					return "duplicate name " + strconv.Quote(tok)
				}
				top.names[tok] = true
				top.expectKey = false
				continue
			}
		case json.Number:
			if strings.ContainsAny(string(tok), ".eE") {
				if _, err := strconv.ParseFloat(string(tok), 64); err != nil {
					return "float overflow"
				}
			}
		}
		// A value ended.
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expectKey = true
		}
	}
}

func decodeJSON(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return v
}

// sameJSON reports whether a and b denote the same value: integer literals
// as exact integers, other numbers as their float64 values (so 1e2, 100.0
// and 100 are one number), strings as decoded text.
func sameJSON(t *testing.T, a, b []byte) bool {
	return sameValue(decodeJSON(t, a), decodeJSON(t, b))
}

func sameValue(x, y any) bool {
	switch x := x.(type) {
	case nil:
		return y == nil
	case bool:
		y, ok := y.(bool)
		return ok && x == y
	case string:
		y, ok := y.(string)
		return ok && x == y
	case json.Number:
		y, ok := y.(json.Number)
		return ok && numberValue(x).Cmp(numberValue(y)) == 0
	case []any:
		y, ok := y.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !sameValue(xv, yv) {
				return false
			}
		}
		return true
	}
	panic(fmt.Sprintf("unexpected %T", x))
}

// numberValue is the exact value n denotes.
func numberValue(n json.Number) *big.Rat {
	if !strings.ContainsAny(string(n), ".eE") {
		r, ok := new(big.Rat).SetString(string(n))
		if !ok {
			panic("bad integer " + string(n))
		}
		return r
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		panic(err)
	}
	return new(big.Rat).SetFloat64(f)
}

// hasBigNumber reports whether v holds a number of magnitude >= 2^53.
func hasBigNumber(v any) bool {
	limit := new(big.Rat).SetFloat64(1 << 53)
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case json.Number:
			return new(big.Rat).Abs(numberValue(v)).Cmp(limit) >= 0
		case []any:
			return slices.ContainsFunc(v, walk)
		case map[string]any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// refCanonicalize is a slow reference canonicalization on top of
// encoding/json, for inputs Canonicalize accepts.
func refCanonicalize(t *testing.T, data []byte) string {
	var b strings.Builder
	refWrite(&b, decodeJSON(t, data))
	return b.String()
}

func utf16Of(s string) []uint16 { return utf16.Encode([]rune(s)) }

func refWrite(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		refString(b, v)
	case json.Number:
		b.WriteString(refNumber(string(v)))
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			refWrite(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		slices.SortFunc(names, func(a, b string) int { return slices.Compare(utf16Of(a), utf16Of(b)) })
		b.WriteByte('{')
		for i, k := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			refString(b, k)
			b.WriteByte(':')
			refWrite(b, v[k])
		}
		b.WriteByte('}')
	}
}

func refString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func refNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	if a := math.Abs(f); a >= 1<<53 && a < 1e21 &&
		strconv.FormatFloat(a, 'f', -1, 64) != strconv.FormatFloat(a, 'f', 0, 64) {
		return esReference(f, true)
	}
	return esReference(f, false)
}

// refWithout is the reference for CanonicalizeWithout's removal.
func refWithout(v any, path ...string) any {
	root, ok := v.(map[string]any)
	if !ok {
		return v
	}
	var chain []map[string]any // chain[i] is the object at path[i]
	cur := root
	for i, name := range path {
		m, ok := cur[name]
		if !ok {
			break
		}
		if i == len(path)-1 {
			delete(cur, name)
			break
		}
		obj, ok := m.(map[string]any)
		if !ok {
			return v
		}
		chain = append(chain, obj)
		cur = obj
	}
	for i := len(chain) - 1; i >= 0 && len(chain[i]) == 0; i-- {
		parent := root
		if i > 0 {
			parent = chain[i-1]
		}
		delete(parent, path[i])
	}
	return root
}

// FuzzStringValue checks the fast path for string values (scanString,
// scanEscaped) against str, the exact decoder: for any contents, at any
// offset in the input, a string the fast path takes is one str takes, and
// its canonical form is what appendString writes for str's decoding; a
// string it refuses gets str's error, as Canonicalize reports it.
func FuzzStringValue(f *testing.F) {
	for _, s := range []string{``, `a`, `plain ASCII text longer than a word`, `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\u0000`,
		`\ud83d\ude00`, `\ud800`, `\udc00`, `\ud800\u0041`, `\x`, `\u12`, "a\x01b", "\xff", "é😀", `ab\"cd\\ef\ngh\tij\u0022kl\u005cmn`,
		`0123456\"`, `01234567\\\\\\\\\"`, "tab\there", `\u00`, `\`, `\ud83d\ude0`, strings.Repeat(`x\n`, 20)} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(5))
	}
	f.Fuzz(func(t *testing.T, contents []byte, pad uint8) {
		// The string at an offset of pad%8 spaces, closed or not (the
		// fuzzer may put a quote inside).
		in := append(bytes.Repeat([]byte(" "), int(pad%8)), '"')
		in = append(in, contents...)
		in = append(in, '"')
		exact := &parser{data: in, pos: int(pad % 8)}
		want, wantErr := exact.str()
		fast := &parser{data: in, pos: int(pad % 8)}
		got, canon, err := fast.strValue()
		if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("%q: strValue error %v, str error %v", in, err, wantErr)
		}
		if err != nil {
			return
		}
		if fast.pos != exact.pos {
			t.Fatalf("%q: strValue ends at %d, str at %d", in, fast.pos, exact.pos)
		}
		var gotForm []byte
		if canon {
			gotForm = append(append([]byte{'"'}, fast.bytes(got)...), '"')
		} else {
			gotForm = appendString(nil, fast.bytes(got))
		}
		if wantForm := appendString(nil, exact.bytes(want)); !bytes.Equal(gotForm, wantForm) {
			t.Fatalf("%q: canonical form %q, want %q", in, gotForm, wantForm)
		}
	})
}

// FuzzLargeInput checks that an input large enough to have its UTF-8
// checked apart (the fuzzer's data inside a long string's object) gives
// the form and the error of one parse that checks each string itself.
func FuzzLargeInput(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("\"\xff\""))
	f.Add([]byte("[\"a\xc3\", tru]"))
	pad := strings.Repeat("padding ", checkUTF8Apart/8)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := append([]byte(`{"pad":"`+pad+`","v":`), data...)
		in = append(in, '}')
		p := new(parser)
		root, wantErr := p.parseOnce(in)
		var want []byte
		if wantErr == nil {
			o := out{}
			p.write(&o, &root)
			want = o.buf
		}
		got, err := Canonicalize(in)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("Canonicalize(%q in a large object): error %v, one parse's %v", data, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Canonicalize(%q in a large object): form differs from one parse's", data)
		}
	})
}
