package docstest

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	module  = "github.com/buzzgate/buzzgate/"
	root    = "../.."
	archDoc = "../../docs/architecture.md"
)

// graphLeaves are the packages the graph leaves out, which the text beside
// it describes: the protocols' wire shapes that hold no translation,
// imported by everything that reads or writes a protocol's JSON.
var graphLeaves = []string{"pkg/wire", "pkg/wire/chat"}

// imports returns the direct imports of every package under pkg/ and
// functions/ (without their tests) that are packages of this module, by
// path relative to the module ("pkg/app").
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, top := range []string{"pkg", "functions"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if name := d.Name(); name == "testdata" || strings.HasSuffix(name, "test") {
				return filepath.SkipDir // test helpers (providertest, clientapitest) are not part of the graph
			}
			p, err := build.ImportDir(path, 0)
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			out[rel] = nil
			for _, imp := range p.Imports {
				if dep, ok := strings.CutPrefix(imp, module); ok && !strings.HasPrefix(dep, "internal/") {
					out[rel] = append(out[rel], dep)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var (
	mermaidGraph = regexp.MustCompile("(?s)```mermaid\ngraph TD\n(.*?)```")
	graphNode    = regexp.MustCompile(`(\w+)(?:\["([^"]+)"\])?`)
)

// docGraph reads the package graph of docs/architecture.md: its edges,
// by package path ("pkg/app" -> "pkg/httpapi"). A node is labelled with
// its path, "pkg/" left out below pkg/ ("provider/openai") except for
// the top-level packages ("pkg/app").
func docGraph(t *testing.T) (nodes map[string]bool, edges map[[2]string]bool) {
	t.Helper()
	b, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := mermaidGraph.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no mermaid \"graph TD\" block", archDoc)
	}
	label := map[string]string{}
	var pairs [][2]string
	for _, line := range strings.Split(string(m[1]), "\n") {
		from, to, ok := strings.Cut(strings.TrimSpace(line), "-->")
		if !ok {
			if strings.TrimSpace(line) != "" {
				t.Fatalf("%s: graph line %q is not an edge", archDoc, line)
			}
			continue
		}
		var ids [2]string
		for i, end := range []string{from, to} {
			n := graphNode.FindStringSubmatch(strings.TrimSpace(end))
			ids[i] = n[1]
			if n[2] != "" {
				path := n[2]
				if !strings.HasPrefix(path, "pkg/") && !strings.HasPrefix(path, "functions/") {
					path = "pkg/" + path
				}
				label[n[1]] = path
			}
		}
		pairs = append(pairs, ids)
	}
	nodes, edges = map[string]bool{}, map[[2]string]bool{}
	for _, p := range pairs {
		a, b := label[p[0]], label[p[1]]
		if a == "" || b == "" {
			t.Fatalf("%s: edge %s --> %s: a node without a [\"path\"] label", archDoc, p[0], p[1])
		}
		nodes[a], nodes[b] = true, true
		edges[[2]string{a, b}] = true
	}
	return nodes, edges
}

// TestArchitectureGraph checks the package graph of docs/architecture.md
// against the code: every package under pkg/ and functions/ is a node
// (but the wire leaves), every edge drawn is a direct import, and every
// direct import between two nodes is drawn or follows from a path of
// drawn edges.
func TestArchitectureGraph(t *testing.T) {
	real := imports(t)
	nodes, edges := docGraph(t)
	for pkg := range real {
		if !nodes[pkg] && !slices.Contains(graphLeaves, pkg) {
			t.Errorf("%s: package %s is not in the graph", archDoc, pkg)
		}
	}
	for e := range edges {
		if _, ok := real[e[0]]; !ok {
			t.Errorf("%s: node %s is not a package", archDoc, e[0])
		} else if !slices.Contains(real[e[0]], e[1]) {
			t.Errorf("%s: edge %s --> %s: %s does not import %s", archDoc, e[0], e[1], e[0], e[1])
		}
	}
	reach := func(from, to string) bool {
		seen := map[string]bool{from: true}
		todo := []string{from}
		for len(todo) > 0 {
			n := todo[0]
			todo = todo[1:]
			for e := range edges {
				if e[0] == n && !seen[e[1]] {
					if e[1] == to {
						return true
					}
					seen[e[1]] = true
					todo = append(todo, e[1])
				}
			}
		}
		return false
	}
	for pkg, deps := range real {
		if !nodes[pkg] {
			continue
		}
		for _, d := range deps {
			if nodes[d] && !reach(pkg, d) {
				t.Errorf("%s: %s imports %s: draw %s --> %s (or a path between them)", archDoc, pkg, d, pkg, d)
			}
		}
	}
}
