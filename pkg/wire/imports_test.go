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

// hub are the packages beside the wire packages that a protocol's
// translations to and from the hub and its stream observer use, and the
// AWS SDK, whose types are the Converse protocol's (the Bedrock Runtime's
// call and events, and their documents).
var hub = []string{module + "pkg/llm", module + "pkg/sse", module + "pkg/canonjson", module + "internal/jsonstr",
	module + "internal/jsonobj", "github.com/aws/aws-sdk-go-v2/", "github.com/aws/smithy-go/"}

// testOnly are what a wire package's tests may import besides.
var testOnly = []string{"github.com/google/go-cmp/", module + "internal/reqtest", module + "internal/benchbody"}

// TestImports keeps the wire packages near the bottom: each imports the
// standard library, the JSON library, the other wire packages and the hub
// only (its tests a comparison library and the translations' test helpers
// besides), and says in its package doc what it is.
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
		check := func(imports []string, allowed ...string) {
			for _, imp := range imports {
				first, _, _ := strings.Cut(imp, "/")
				switch {
				case strings.HasPrefix(imp, module+"pkg/wire/"), strings.HasPrefix(imp, jsonLibrary),
					slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(imp, a) }):
				case strings.HasPrefix(imp, module), strings.Contains(first, "."):
					t.Errorf("pkg/wire/%s imports %s", name, imp)
				}
			}
		}
		check(p.Imports, hub...)
		check(slices.Concat(p.TestImports, p.XTestImports), slices.Concat(hub, testOnly)...)
	}
}
