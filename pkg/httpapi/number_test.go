package httpapi

import (
	"encoding/json"
	"testing"
)

func TestNumber(t *testing.T) {
	for raw, want := range map[string]struct {
		n  float64
		ok bool
	}{
		"4096":             {4096, true},
		"0":                {0, true},
		"1.5":              {1.5, true},
		"1e3":              {1000, true},
		"-2":               {-2, true},
		"null":             {0, true},
		"007":              {0, false},
		`"12"`:             {0, false},
		"":                 {0, false},
		"999999999999999":  {999999999999999, true},
		"1234567890123456": {1234567890123456, true},
		"1e400":            {0, false},
	} {
		n, ok := number(json.RawMessage(raw))
		if ok != want.ok || (ok && n != want.n) {
			t.Errorf("number(%q) = %v, %v; want %v, %v", raw, n, ok, want.n, want.ok)
		}
	}
}

// FuzzNumber holds number equal to json.Unmarshal into a float64.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"4096", "0", "00", "1.5", "-1", "null", " 12", "12 ", `"7"`, "1e2", "123456789012345", "1234567890123456"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := number(json.RawMessage(s))
		wn, wok := numberJSON(json.RawMessage(s))
		if ok != wok || n != wn {
			t.Errorf("number(%q) = %v, %v; json.Unmarshal: %v, %v", s, n, ok, wn, wok)
		}
	})
}

// BenchmarkNumber is a request's max_tokens read by number against
// json.Unmarshal.
func BenchmarkNumber(b *testing.B) {
	raw := json.RawMessage("4096")
	for _, c := range []struct {
		name string
		f    func(json.RawMessage) (float64, bool)
	}{{"number", number}, {"json", numberJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if n, ok := c.f(raw); !ok || n != 4096 {
					b.Fatal(n, ok)
				}
			}
		})
	}
}
