package lambdaedge_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/lambdaedge"
)

// panickingPrice is a ledger with a bug: Price and Bill, one of which runs
// before a stream's last events (Bill for an account with a balance, as
// the demo project has), panic.
type panickingPrice struct{ billing.Ledger }

func (panickingPrice) Price(context.Context, billing.Entry) error { panic("ledger bug") }
func (panickingPrice) Bill(context.Context, billing.Entry) error  { panic("ledger bug") }

// TestGatewayPanicMidStreamEndsWithError: as the package documents,
// a handler that panics after its response started ends the stream with an
// error (which the runtime reports to Lambda), not as a whole response; the
// gateway's handler behind Wrap must do the same.
func TestGatewayPanicMidStreamEndsWithError(t *testing.T) {
	l := memledger.New(memledger.Options{})
	a, err := app.FromConfig(catalog.Demo(), app.Options{Accounts: httpapi.Accounts{Ledger: panickingPrice{l}, Keys: l}})
	if err != nil {
		t.Fatal(err)
	}
	ev := event(http.MethodPost, "/api/v1/chat/completions", `{"model":"demo/chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	ev.Headers["Authorization"] = "Bearer sk-demo"
	resp, err := lambdaedge.Wrap(a.Handler)(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	if err == nil {
		t.Errorf("the stream of a request that panicked mid-answer ended without an error; its body:\n%s", body)
	}
}
