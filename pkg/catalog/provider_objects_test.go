package catalog

import (
	"strings"
	"testing"
)

func TestProviderObjectsField(t *testing.T) {
	const cfg = `providers:
  - {name: a, api: openai, base_url: "http://127.0.0.1:1/v1"%s}
models:
  - id: m
    routes: [{provider: a, model: x, input_price: 1, output_price: 1}]
`
	for _, tc := range []struct{ field, err string }{
		{"", ""},
		{", provider_objects: refuse", ""},
		{", provider_objects: allow", ""},
		{", provider_objects: yes", `providers[0].provider_objects: must be "refuse" or "allow", got "yes"`},
	} {
		c, err := Parse([]byte(strings.Replace(cfg, "%s", tc.field, 1)))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.field, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.field, err)
		}
		if got, want := c.Providers[0].AllowsProviderObjects(), strings.Contains(tc.field, "allow"); got != want {
			t.Errorf("%q: AllowsProviderObjects() = %v, want %v", tc.field, got, want)
		}
	}
}
