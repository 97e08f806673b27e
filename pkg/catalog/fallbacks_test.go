package catalog

import (
	"slices"
	"strings"
	"testing"
)

func TestModelFallbacks(t *testing.T) {
	const cfg = `providers:
  - {name: a, api: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  - id: m
    %s
    routes: [{provider: a, model: x, input_price: 1, output_price: 1}]
  - id: n
    %s
    routes: [{provider: a, model: y, input_price: 1, output_price: 1}]
  - id: o
    routes: [{provider: a, model: z, input_price: 1, output_price: 1}]
`
	for _, tc := range []struct {
		name, m, n string
		err        string
		want       []string // m's fallbacks when valid
	}{
		{"none", "", "", "", nil},
		{"one", "fallbacks: [n]", "", "", []string{"n"}},
		{"ordered", "fallbacks: [o, n]", "", "", []string{"o", "n"}},
		// Only direct fallbacks are used, so two models naming each other
		// cannot loop.
		{"mutual", "fallbacks: [n]", "fallbacks: [m]", "", []string{"n"}},
		{"unknown", "fallbacks: [n, nope]", "", `config: models[0].fallbacks[1]: unknown model "nope"`, nil},
		{"self", "", "fallbacks: [o, n]", `config: models[1].fallbacks[1]: model "n" cannot be its own fallback`, nil},
		{"duplicate", "fallbacks: [n, o, n]", "", `config: models[0].fallbacks[2]: model "n" is already a fallback at models[0].fallbacks[0]`, nil},
		{"empty", `fallbacks: [""]`, "", `config: models[0].fallbacks[0]: must not be empty`, nil},
		{"suffix", "fallbacks: [\"n:floor\"]", "", `config: models[0].fallbacks[0]: unknown model "n:floor"`, nil},
		{"not a list", "fallbacks: n", "", "models[0].fallbacks", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(strings.Replace(cfg, "%s", tc.m, 1), "%s", tc.n, 1)
			c, err := Parse([]byte(src))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, _ := c.Model("m")
			if !slices.Equal(m.Fallbacks, tc.want) {
				t.Errorf("fallbacks %q, want %q", m.Fallbacks, tc.want)
			}
		})
	}
}
