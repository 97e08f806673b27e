package canonjson

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/buzzgate/buzzgate/internal/benchbody"
)

// This file holds canonicalization as go-json-experiment's jsontext does
// it (RFC 8785: [jsontext.Value.Canonicalize]) plus this package's own
// rules, the differential fuzz test that holds the package to it, and the
// benchmark that keeps the package's hand-written parser: see
// BenchmarkJSONText.

// jsontextCanonicalize is [CanonicalizeWithout] built on jsontext:
// jsontext validates the input (RFC 8259, UTF-8, duplicate names),
// formats floats as ECMAScript does, sorts members and escapes strings;
// the package's rules on top are integers kept as written ("-0" as "0"),
// floats beyond float64 refused, integral floats from 2^53 whose
// ECMAScript digits are not their value written with an exponent, and the
// removal of path. Its errors say only that the input is refused.
func jsontextCanonicalize(data []byte, path ...string) ([]byte, error) {
	if len(data) > maxInput {
		return nil, errors.New("input too large")
	}
	if !jsontext.Value(data).IsValid() {
		return nil, errors.New("invalid JSON")
	}
	// Numbers in their canonical form, the rest as it is.
	var buf bytes.Buffer
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	enc := jsontext.NewEncoder(&buf)
	for {
		if dec.PeekKind() == '0' {
			raw, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			num, err := jsontextNumber(raw)
			if err != nil {
				return nil, err
			}
			if err := enc.WriteValue(num); err != nil {
				return nil, err
			}
			continue
		}
		tok, err := dec.ReadToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if dec.StackDepth() > MaxDepth {
			return nil, errors.New("nesting too deep")
		}
		if err := enc.WriteToken(tok); err != nil {
			return nil, err
		}
	}
	v := jsontext.Value(bytes.TrimSpace(buf.Bytes()))
	if len(path) > 0 && v.Kind() == '{' {
		var err error
		if v, _, err = jsontextWithout(v, path, true); err != nil {
			return nil, err
		}
	}
	// The numbers are canonical already: jsontext must keep them.
	if err := v.Canonicalize(jsontext.CanonicalizeRawInts(false), jsontext.CanonicalizeRawFloats(false)); err != nil {
		return nil, err
	}
	return v, nil
}

// jsontextNumber is the canonical form of a number literal under the
// package's rules.
func jsontextNumber(raw jsontext.Value) (jsontext.Value, error) {
	if !bytes.ContainsAny(raw, ".eE") {
		if string(raw) == "-0" {
			return jsontext.Value("0"), nil
		}
		return raw, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil, err
	}
	if f == 0 {
		return jsontext.Value("0"), nil // RFC 8785's -0, as CanonicalizeRawFloats writes it
	}
	es := jsontext.AppendFloat(nil, f, 64)
	if a := math.Abs(f); a >= 1<<53 && a < 1e21 && string(es) != strconv.FormatFloat(f, 'f', 0, 64) {
		return jsontext.Value(strconv.FormatFloat(f, 'e', -1, 64)), nil
	}
	return es, nil
}

// jsontextWithout removes path from the object obj as CanonicalizeWithout
// does. empty reports that what is left of obj has no members, abort that
// the walk met a value that is not an object, so that nothing is removed.
func jsontextWithout(obj jsontext.Value, path []string, top bool) (out jsontext.Value, abort bool, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	if _, err := dec.ReadToken(); err != nil { // '{'
		return nil, false, err
	}
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, false, err
	}
	members := 0
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, false, err
		}
		name = name.Clone() // ReadValue voids it
		val, err := dec.ReadValue()
		if err != nil {
			return nil, false, err
		}
		if name.String() == path[0] {
			if len(path) == 1 {
				continue
			}
			if val.Kind() != '{' {
				return obj, true, nil
			}
			rest, abort, err := jsontextWithout(val, path[1:], false)
			if err != nil || abort {
				return obj, abort, err
			}
			if string(rest) == "{}" {
				continue
			}
			val = rest
		}
		members++
		if err := enc.WriteToken(name); err != nil {
			return nil, false, err
		}
		if err := enc.WriteValue(val); err != nil {
			return nil, false, err
		}
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, false, err
	}
	return jsontext.Value(bytes.TrimSpace(buf.Bytes())), false, nil
}

// FuzzJSONText holds the package to jsontext's canonicalization plus the
// package's rules: both refuse the same inputs and give the same bytes for
// the others, with and without a removal, whole and written in pieces.
func FuzzJSONText(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"stream_options":{"include_usage":true},"a":1}`, `{"stream_options":{}}`,
		`{"stream_options":{"include_usage":true,"x":1}}`, `{"stream_options":1}`,
		`{"stream_options":{"include_usage":{"a":1}}}`, `[{"stream_options":{}}]`,
		`{"a":{"b":1},"b":{}}`, `{"a":[],"b":2}`, `-0.0e-0`, `-0`, `[-0,-0.0]`,
		`9007199254740993.0`, `1e21`, `1e-7`, `"\u2028\u007f\u001f"`, `"\ud800\udc00"`,
	} {
		f.Add([]byte(s))
	}
	f.Add(benchbody.Chat("m", 4<<10, `"stream_options":{"include_usage":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, path := range [][]string{nil, {"stream_options", "include_usage"}, {"a", "b"}} {
			got, err := CanonicalizeWithout(data, path...)
			want, wantErr := jsontextCanonicalize(data, path...)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("CanonicalizeWithout(%q, %q) error = %v, jsontext's = %v", data, path, err, wantErr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("CanonicalizeWithout(%q, %q) = %q, jsontext's = %q", data, path, got, want)
			}
			var written bytes.Buffer
			length := -1
			err = WriteWithout(&written, func(n int) { length = n }, data, path...)
			if (err != nil) != (wantErr != nil) || (err == nil && (!bytes.Equal(written.Bytes(), want) || length != len(want))) {
				t.Fatalf("WriteWithout(%q, %q) = %q (length %d), %v; jsontext's = %q, %v", data, path, written.Bytes(), length, err, want, wantErr)
			}
		}
	})
}

// TestJSONTextBodies compares the two on coding agents' bodies of the
// benchmarks' sizes, as they are and with the escapes encoding/json
// writes.
func TestJSONTextBodies(t *testing.T) {
	for _, body := range jsontextBodies(t) {
		got, err := CanonicalizeWithout(body.data, "stream_options", "include_usage")
		if err != nil {
			t.Fatalf("%s: %v", body.name, err)
		}
		want, err := jsontextCanonicalize(body.data, "stream_options", "include_usage")
		if err != nil {
			t.Fatalf("%s: jsontext: %v", body.name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the forms differ (%d and %d bytes)", body.name, len(got), len(want))
		}
	}
}

type namedBody struct {
	name string
	data []byte
}

func jsontextBodies(tb testing.TB) []namedBody {
	var bodies []namedBody
	for _, s := range []struct {
		name string
		size int
	}{{"10KB", 10 << 10}, {"200KB", 200 << 10}, {"1MB", 1 << 20}} {
		body := benchbody.Chat("m", s.size, `"stream":true,"stream_options":{"include_usage":true}`)
		bodies = append(bodies, namedBody{s.name, body})
		// encoding/json's escapes (\u003c, \u0026, ...) through jsontext.
		escaped, err := jsontext.AppendFormat(nil, body, jsontext.EscapeForHTML(true))
		if err != nil {
			tb.Fatal(err)
		}
		bodies = append(bodies, namedBody{s.name + "-escaped", escaped})
	}
	return bodies
}

// BenchmarkJSONText measures a keyed request's fingerprint work (the
// canonical body into SHA-256) three ways: this package's parser (hand),
// the jsontext canonicalization with the package's rules that
// FuzzJSONText holds it to (jsontext-rules), and, as the floor of any
// jsontext-based path, jsontext's plain RFC 8785 canonicalization alone
// (jsontext-canonicalize), which changes large integers and so cannot
// serve. The hand-written parser stays while it is the fastest: on a
// 2-core machine it takes about 0.6 times the floor's time (10 KB: 16 µs
// against 27 µs; 1 MB: 1.6 ms against 2.7 ms, and 13 ms with the rules
// through a Decoder and an Encoder), with no allocation that grows with
// the body (the rules path allocates about 16 times the body).
func BenchmarkJSONText(b *testing.B) {
	for _, body := range jsontextBodies(b) {
		b.Run("hand-"+body.name, func(b *testing.B) {
			b.SetBytes(int64(len(body.data)))
			b.ReportAllocs()
			h := sha256.New()
			for b.Loop() {
				h.Reset()
				if err := WriteWithout(h, func(int) {}, body.data, "stream_options", "include_usage"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("jsontext-rules-"+body.name, func(b *testing.B) {
			b.SetBytes(int64(len(body.data)))
			b.ReportAllocs()
			h := sha256.New()
			for b.Loop() {
				h.Reset()
				v, err := jsontextCanonicalize(body.data, "stream_options", "include_usage")
				if err != nil {
					b.Fatal(err)
				}
				h.Write(v)
			}
		})
		b.Run("jsontext-canonicalize-"+body.name, func(b *testing.B) {
			b.SetBytes(int64(len(body.data)))
			b.ReportAllocs()
			h := sha256.New()
			v := make(jsontext.Value, 0, len(body.data))
			for b.Loop() {
				h.Reset()
				v = append(v[:0], body.data...)
				if err := v.Canonicalize(); err != nil {
					b.Fatal(err)
				}
				h.Write(v)
			}
		})
	}
}
