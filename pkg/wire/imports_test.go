package wire_test

import (
	"go/build"
	"os"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/buzzgate/buzzgate/"

// jsonLibrary is the JSON library the wire packages may use beside the
// standard library's (for its typed decoding of unknown members).
const jsonLibrary = "github.com/go-json-experiment/json"

// beneath are the packages of this module a wire package may import
// beside the other wire packages: the hub it translates to and from, and
// the JSON and SSE helpers beneath the hub. Never a client API, the
// gateway, the router or an adapter.
var beneath = []string{"pkg/llm", "pkg/sse", "pkg/canonjson", "internal/jsonstr"}

// testLibrary is the library the wire packages' tests may use beside.
const testLibrary = "github.com/google/go-cmp"

// TestImports keeps the wire packages low: each imports the standard
// library, the JSON library, the other wire packages and the packages
// beneath only (test files included, which may also use go-cmp), and
// says in its package doc what it is.
func TestImports(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "testdata" {
			pkgs = append(pkgs, e.Name())
		}
	}
	if want := []string{"chat", "converse", "messages", "responses"}; !slices.Equal(pkgs, want) {
		t.Errorf("wire packages %v, want %v", pkgs, want)
	}
	for _, name := range pkgs {
		p, err := build.ImportDir(name, build.ImportComment)
		if err != nil {
			t.Fatalf("pkg/wire/%s: %v", name, err)
		}
		if !strings.HasPrefix(p.Doc, "Package "+name+" is ") {
			t.Errorf("pkg/wire/%s: package doc %q", name, p.Doc)
		}
		tests := slices.Concat(p.TestImports, p.XTestImports)
		for _, imp := range slices.Concat(p.Imports, tests) {
			first, _, _ := strings.Cut(imp, "/")
			switch {
			case strings.HasPrefix(imp, module+"pkg/wire/"), strings.HasPrefix(imp, jsonLibrary),
				slices.Contains(beneath, strings.TrimPrefix(imp, module)),
				strings.HasPrefix(imp, testLibrary) && slices.Contains(tests, imp) && !slices.Contains(p.Imports, imp):
			case strings.HasPrefix(imp, module), strings.Contains(first, "."):
				t.Errorf("pkg/wire/%s imports %s", name, imp)
			}
		}
	}
}
