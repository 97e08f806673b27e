package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRoutePremiumPrices: a route's tool_prices and cache_write_1h_price
// parse, default as documented, and a bad one stops start-up naming the
// field.
func TestRoutePremiumPrices(t *testing.T) {
	src := `
providers:
  - {name: a, api: simulated}
models:
  - id: m
    routes:
      - provider: a
        model: up
        input_price: 3
        output_price: 15
        cache_write_price: 3.75
        cache_write_1h_price: 6
        tool_prices: {web_search: 0.01, code_interpreter: 0.03, file_search: 0}
  - id: plain
    routes:
      - {provider: a, model: up, input_price: 3, cache_write_price: 3.75}
  - id: bare
    routes:
      - {provider: a, model: up, input_price: 3}
projects:
  - {id: p, keys: [{key: sk-test-key}]}
`
	c, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Models[0].Routes[0]
	if diff := cmp.Diff(map[string]float64{"web_search": 0.01, "code_interpreter": 0.03, "file_search": 0}, r.ToolPrices); diff != "" {
		t.Errorf("tool_prices (-want +got):\n%s", diff)
	}
	if p, ok := r.ToolPrice("file_search"); !ok || p != 0 {
		t.Errorf("ToolPrice(file_search) = %v, %v; want a price of 0", p, ok)
	}
	if _, ok := r.ToolPrice("image_generation"); ok {
		t.Error("ToolPrice(image_generation) found a price the route does not set")
	}
	for _, tc := range []struct {
		model string
		want  float64
	}{{"m", 6}, {"plain", 3.75}, {"bare", 3}} {
		m, _ := c.Model(tc.model)
		if got := m.Routes[0].CacheWrite1h(); got != tc.want {
			t.Errorf("%s: CacheWrite1h() = %v, want %v", tc.model, got, tc.want)
		}
	}

	bad := []struct {
		name     string
		mutate   func(r *Route)
		wantPath string
		wantMsg  string
	}{
		{"negative 1h price", func(r *Route) { r.CacheWrite1hPrice = ptr(-1) }, "models[0].routes[0].cache_write_1h_price", "must be a finite number >= 0, got -1"},
		{"negative tool price", func(r *Route) { r.ToolPrices = map[string]float64{"web_search": -0.01} }, "models[0].routes[0].tool_prices.web_search", "must be a finite number >= 0 (USD per call), got -0.01"},
		{"dated tool type", func(r *Route) { r.ToolPrices = map[string]float64{"web_search_20250305": 0.01} }, "models[0].routes[0].tool_prices", `name the type without its version date: "web_search"`},
		{"dated OpenAI tool type", func(r *Route) { r.ToolPrices = map[string]float64{"web_search_preview_2025_03_11": 0.01} }, "models[0].routes[0].tool_prices", `"web_search_preview"`},
		{"tool type case", func(r *Route) { r.ToolPrices = map[string]float64{"Web_Search": 0.01} }, "models[0].routes[0].tool_prices", "lower-case"},
		{"empty tool type", func(r *Route) { r.ToolPrices = map[string]float64{"": 0.01} }, "models[0].routes[0].tool_prices", "1 to 64"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c.Models[0].Routes[0])
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want a *FieldError", err)
			}
			if fe.Path != tt.wantPath || !strings.Contains(fe.Message, tt.wantMsg) {
				t.Errorf("Validate() = %v; want path %s and a message with %q", err, tt.wantPath, tt.wantMsg)
			}
		})
	}

	// A negative price in the file stops start-up with the field's path.
	_, err = Parse([]byte(strings.Replace(src, "web_search: 0.01", "web_search: -1", 1)))
	if err == nil || !strings.Contains(err.Error(), "models[0].routes[0].tool_prices.web_search: must be a finite number >= 0") {
		t.Errorf("Parse with a negative tool price: %v", err)
	}
}
