package dynalite_test

import (
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/internal/dynalite"
)

func TestNotInstalled(t *testing.T) {
	t.Setenv(dynalite.EnvBinary, t.TempDir()+"/no-dynalite")
	_, err := dynalite.Launch()
	if err == nil || !strings.Contains(err.Error(), dynalite.NotInstalled) {
		t.Fatalf("Launch without dynalite: %v, want %q", err, dynalite.NotInstalled)
	}
}
