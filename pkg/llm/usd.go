package llm

import (
	"encoding/json"
	"math"
	"strconv"
)

// USD is an amount of US dollars (a cost, a price, a balance) as every
// answer, list and log of the gateway writes it: a plain decimal, never an
// exponent (0.000008, 0.0000005, 12.5), so that a client reads the same
// number format from an answer's usage.cost, GET /api/v1/usage and the
// models list. Amounts the gateway computes are whole nano-dollars, so they
// have at most nine decimals.
type USD float64

// MarshalJSON writes u as AppendUSD does; NaN and infinities are an error,
// as encoding/json makes them.
func (u USD) MarshalJSON() ([]byte, error) {
	f := float64(u)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return json.Marshal(f)
	}
	return AppendUSD(make([]byte, 0, 24), f), nil
}

// String is u as AppendUSD writes it (text logs).
func (u USD) String() string { return string(AppendUSD(nil, float64(u))) }

// AppendUSD appends an amount of US dollars as a plain decimal: the
// shortest that reads back as f, without an exponent.
func AppendUSD(b []byte, f float64) []byte {
	if f == 0 {
		// -0 too: an amount has no sign of zero.
		return append(b, '0')
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}
