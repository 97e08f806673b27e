package wire_test

import (
	"go/build"
	"os"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/buzzgate/buzzgate/"

// jsonLibrary is go-json-experiment/json, whose jsontext reads JSON.
const jsonLibrary = "github.com/go-json-experiment/json/"

// TestImports keeps the wire packages leaves: each imports the standard
// library, the other wire packages and the JSON library (package files
// only) and nothing else, and says in its package doc what it is.
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
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			first, _, _ := strings.Cut(imp, "/")
			switch {
			case strings.HasPrefix(imp, module+"pkg/wire/"):
			case strings.HasPrefix(imp, jsonLibrary) && slices.Contains(p.Imports, imp):
			case strings.HasPrefix(imp, module), strings.Contains(first, "."):
				t.Errorf("pkg/wire/%s imports %s", name, imp)
			}
		}
	}
}
