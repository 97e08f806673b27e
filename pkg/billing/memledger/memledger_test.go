package memledger_test

import (
	"testing"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/billingtest"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
)

var pepper = []byte("test pepper")

func TestLedger(t *testing.T) {
	billingtest.Run(t, func(t *testing.T) billing.Ledger { return memledger.New(memledger.Options{Pepper: pepper}) })
}

func TestKeyStore(t *testing.T) {
	billingtest.RunKeyStore(t, pepper, func(t *testing.T) billing.KeyStore {
		return memledger.New(memledger.Options{Pepper: pepper})
	})
}

func TestHolds(t *testing.T) {
	billingtest.RunHolds(t, func(t *testing.T) billingtest.Ledger { return memledger.New(memledger.Options{Pepper: pepper}) })
}
