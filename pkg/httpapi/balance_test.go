package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

func TestAccountJSON(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name string
		acct billing.Account
		want string
	}{
		{"unlimited", billing.Account{SpentNanos: 500}, `{"balance":null,"spent":0.0000005} {"id":"k","limit":null,"spent":0,"left":null}`},
		{"bounded", billing.Account{BalanceNanos: n(6000), SpentNanos: 14000, KeySpentNanos: 14000, KeyLimitNanos: n(20000)},
			`{"balance":0.000006,"spent":0.000014} {"id":"k","limit":0.00002,"spent":0.000014,"left":0.000006}`},
		// Past its bound: the balance below zero as it is, the key's
		// left at zero as a budget's is.
		{"overdrawn", billing.Account{BalanceNanos: n(-2500), SpentNanos: 22500, KeySpentNanos: 22500, KeyLimitNanos: n(20000)},
			`{"balance":-0.0000025,"spent":0.0000225} {"id":"k","limit":0.00002,"spent":0.0000225,"left":0}`},
	} {
		b, k := toAccountJSON(c.acct, "k")
		bj, _ := json.Marshal(b)
		kj, _ := json.Marshal(k)
		if got := string(bj) + " " + string(kj); got != c.want {
			t.Errorf("%s: got %s\nwant %s", c.name, got, c.want)
		}
	}
}
