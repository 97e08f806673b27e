package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFunctionsDoNotLinkTesting: the binaries under functions/ ship to
// Lambda; test-only code (the dynalite harness, test doubles) must stay out
// of them, and importing "testing" anywhere in their graph is the tell.
func TestFunctionsDoNotLinkTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/buzzgate/buzzgate/functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list returned %d packages; want the binaries' whole graph", len(deps))
	}
	for _, d := range deps {
		if d == "testing" || strings.HasPrefix(d, "testing/") || strings.HasSuffix(d, "/internal/dynalite") {
			t.Errorf("a binary under functions/ links %s", d)
		}
	}
}
