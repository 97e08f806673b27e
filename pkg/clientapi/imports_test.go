package clientapi_test

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/buzzgate/buzzgate/pkg/"

// TestImportGraph keeps the layering of docs/architecture.md#packages:
// pkg/clientapi is beneath the client APIs, which are beneath pkg/httpapi.
// No client-API package imports pkg/httpapi or another client API, and
// pkg/clientapi imports none of them. Test files count too (except the
// external tests of this package, which read no code).
func TestImportGraph(t *testing.T) {
	apis := []string{"clientapi/chat", "clientapi/messages", "clientapi/responses"}
	beneath := []string{"clientapi", "clientapi/clientapitest"}
	forbidden := map[string][]string{}
	for _, b := range beneath {
		forbidden[b] = append([]string{"httpapi"}, apis...)
	}
	for _, a := range apis {
		for _, other := range apis {
			if other != a {
				forbidden[a] = append(forbidden[a], other)
			}
		}
		forbidden[a] = append(forbidden[a], "httpapi")
	}
	seen := 0
	for pkg, not := range forbidden {
		dir := "." + filepath.FromSlash(strings.TrimPrefix(pkg, "clientapi"))
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		imports := append(append(slices.Clone(p.Imports), p.TestImports...), p.XTestImports...)
		if pkg == "clientapi" {
			imports = append(slices.Clone(p.Imports), p.TestImports...)
		}
		for _, imp := range imports {
			for _, n := range not {
				if imp == module+n || strings.HasPrefix(imp, module+n+"/") {
					t.Errorf("pkg/%s imports pkg/%s", pkg, n)
				}
			}
		}
		seen++
	}
	if seen != len(apis)+len(beneath) {
		t.Fatalf("checked %d packages", seen)
	}
	// A new client-API package joins the list above.
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "testdata" && !slices.Contains(apis, "clientapi/"+e.Name()) && !slices.Contains(beneath, "clientapi/"+e.Name()) {
			t.Errorf("pkg/clientapi/%s is in no list of TestImportGraph", e.Name())
		}
	}
}
