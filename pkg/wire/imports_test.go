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

// awsSDK is the AWS SDK, whose types are the Converse protocol's (the
// Bedrock Runtime's call and events, and their documents).
var awsSDK = []string{"github.com/aws/aws-sdk-go-v2/", "github.com/aws/smithy-go/"}

// TestImports keeps the wire packages beneath the adapters and the client
// APIs: each imports the standard library, the JSON library, the AWS SDK,
// the hub (pkg/llm) and the other wire packages only (test files
// included, with go-cmp), and says in its package doc what it is.
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
			case strings.HasPrefix(imp, module+"pkg/wire/"), strings.HasPrefix(imp, jsonLibrary), imp == module+"pkg/llm",
				strings.HasPrefix(imp, awsSDK[0]), strings.HasPrefix(imp, awsSDK[1]),
				strings.HasPrefix(imp, "github.com/google/go-cmp/") && !slices.Contains(p.Imports, imp):
			case strings.HasPrefix(imp, module), strings.Contains(first, "."):
				t.Errorf("pkg/wire/%s imports %s", name, imp)
			}
		}
	}
}
