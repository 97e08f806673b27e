package app_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
)

// TestLongestNamesAreBilled: the config's names go into every bill (the
// provider's name, the model's id, the project's id). At the longest the
// config takes, an answer is billed at the cost it reports; one byte longer
// and the config is refused, where once it was taken and its answers went
// unbilled (the ledger refused them after they were served).
func TestLongestNamesAreBilled(t *testing.T) {
	config := func(n int) string {
		return `
providers:
  - name: ` + strings.Repeat("p", n) + `
    api: simulated
    simulated:
      words: 12
models:
  - id: ` + strings.Repeat("m", n) + `
    routes:
      - provider: ` + strings.Repeat("p", n) + `
        model: sim
        input_price: 1000
        output_price: 1000
projects:
  - id: ` + strings.Repeat("j", n) + `
    keys:
      - key: sk-names-0123456789
`
	}
	if _, err := catalog.Parse([]byte(config(catalog.MaxNameBytes + 1))); err == nil {
		t.Errorf("a config with names of %d bytes was taken", catalog.MaxNameBytes+1)
	}
	cfg, err := catalog.Parse([]byte(config(catalog.MaxNameBytes)))
	if err != nil {
		t.Fatalf("a config with names of %d bytes: %v", catalog.MaxNameBytes, err)
	}
	ledger := memledger.New(memledger.Options{})
	a, err := app.FromConfig(cfg, app.Options{Accounts: httpapi.Accounts{Ledger: ledger, Keys: ledger}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/api/v1/chat/completions",
		strings.NewReader(`{"model":"`+strings.Repeat("m", catalog.MaxNameBytes)+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-names-0123456789")
	rec := httptest.NewRecorder()
	a.Handler.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var body struct {
		Usage struct{ Cost float64 } `json:"usage"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Usage.Cost <= 0 {
		t.Fatalf("usage.cost %v (%v): want > 0", body.Usage.Cost, err)
	}
	ctx := context.Background()
	if err := a.Finisher.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.Reconcile(ctx, time.Now().Add(24*time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	acct, err := ledger.Account(ctx, strings.Repeat("j", catalog.MaxNameBytes), billing.ConfigKeyID(nil, "sk-names-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	e, entryErr := ledger.Entry(ctx, rec.Header().Get("X-Request-Id"))
	if want := billing.USDToNanos(body.Usage.Cost); acct.SpentNanos != want || entryErr != nil || e.CostNanos != want || len(rep.WrittenOff) != 0 {
		t.Errorf("answered with usage.cost %v: spent %d nanos (want %d), entry %+v (%v); %d holds left to write off",
			body.Usage.Cost, acct.SpentNanos, want, e, entryErr, len(rep.WrittenOff))
	}
}
