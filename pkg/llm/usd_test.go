package llm

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestUSDPlainDecimal(t *testing.T) {
	for _, c := range []struct {
		usd  float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{0.000008, "0.000008"},
		{0.0000075, "0.0000075"},
		{8e-7, "0.0000008"},
		{1e-9, "0.000000001"},
		{-0.0000025, "-0.0000025"},
		{0.15, "0.15"},
		{12.5, "12.5"},
		{1234567.000000001, "1234567.000000001"},
		{3e21, "3000000000000000000000"},
	} {
		b, err := json.Marshal(USD(c.usd))
		if err != nil || string(b) != c.want {
			t.Errorf("json.Marshal(USD(%g)) = %s, %v; want %s", c.usd, b, err, c.want)
		}
		if s := USD(c.usd).String(); s != c.want {
			t.Errorf("USD(%g).String() = %s, want %s", c.usd, s, c.want)
		}
		// It reads back as the same number.
		if f, err := strconv.ParseFloat(c.want, 64); err != nil || f != c.usd {
			t.Errorf("%s reads back as %g, %v; want %g", c.want, f, err, c.usd)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if b, err := json.Marshal(USD(bad)); err == nil {
			t.Errorf("json.Marshal(USD(%g)) = %s, want an error", bad, b)
		}
	}
}

func TestUsageCostPlainDecimal(t *testing.T) {
	b, err := json.Marshal(Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2, Cost: 5e-7})
	if want := `{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"cost":0.0000005}`; err != nil || string(b) != want {
		t.Errorf("json.Marshal = %s, %v; want %s", b, err, want)
	}
}

// TestUSDInLogs: a cost logged as a USD is the same plain decimal in a JSON
// log line (and a text one).
func TestUSDInLogs(t *testing.T) {
	var j, txt bytes.Buffer
	slog.New(slog.NewJSONHandler(&j, nil)).Info("x", "cost", USD(5e-7))
	slog.New(slog.NewTextHandler(&txt, nil)).Info("x", "cost", USD(5e-7))
	if !strings.Contains(j.String(), `"cost":0.0000005}`) || !strings.Contains(txt.String(), "cost=0.0000005\n") {
		t.Errorf("logged as %s and %s", j.String(), txt.String())
	}
}
