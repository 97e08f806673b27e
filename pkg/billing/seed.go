package billing

import (
	"context"
	"fmt"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// SeedConfig applies the config file's projects to a ledger and a key
// store (usually the same store): each project is seeded once (Ledger.Seed:
// its balance and its keys' limits, only where the ledger has none yet) and
// each key is imported by its hash with id ConfigKeyID. It is idempotent:
// every instance may call it at start-up, at the same time.
func SeedConfig(ctx context.Context, l Ledger, ks KeyStore, pepper []byte, projects []catalog.Project) error {
	for _, p := range projects {
		limits := make(map[string]*int64, len(p.Keys))
		for _, k := range p.Keys {
			limits[ConfigKeyID(pepper, k.Key)] = USDPtrToNanos(k.Limit)
		}
		if err := l.Seed(ctx, p.ID, USDPtrToNanos(p.Balance), limits); err != nil {
			return fmt.Errorf("seed project %s: %w", p.ID, err)
		}
		for i, k := range p.Keys {
			if err := ks.ImportKey(ctx, p.ID, HashKey(pepper, k.Key), ConfigKeyID(pepper, k.Key)); err != nil {
				return fmt.Errorf("import key %d of project %s: %w", i, p.ID, err)
			}
		}
	}
	return nil
}
