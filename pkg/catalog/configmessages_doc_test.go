package catalog_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// formatVerb is a fmt verb in a message's format string.
var formatVerb = regexp.MustCompile(`%[-+# 0-9.]*[vqdsgfe]`)

// messageFormats returns, as anchored regular expressions, the string
// constants of the package's code and their concatenations with other
// values ("is required for api: " + api + " (e.g. ...)"), each fmt verb
// or value standing for any text.
func messageFormats(t *testing.T) []*regexp.Regexp {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	quote := func(s string) string {
		parts := formatVerb.Split(s, -1)
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		return strings.Join(parts, ".+")
	}
	// flatten writes an expression as a pattern: literals as themselves,
	// a sum of parts part by part, anything else as any text.
	var flatten func(e ast.Expr) string
	flatten = func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, _ := strconv.Unquote(e.Value)
				return quote(s)
			}
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				return flatten(e.X) + flatten(e.Y)
			}
		case *ast.ParenExpr:
			return flatten(e.X)
		}
		return ".+"
	}
	var out []*regexp.Regexp
	// add keeps a pattern with some words of its own: a lone verb or a
	// sum of values would match any message.
	add := func(pattern string) {
		if len(strings.ReplaceAll(pattern, ".+", "")) >= 8 {
			out = append(out, regexp.MustCompile("^"+pattern+"$"))
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					add(flatten(n))
				}
			case *ast.BinaryExpr:
				if n.Op == token.ADD {
					add(flatten(n))
				}
			}
			return true
		})
	}
	return out
}

// indexes are the list indexes of a path: providers[0] is providers[].
var indexes = regexp.MustCompile(`\[[0-9]+\]`)

// TestConfigFieldMessages checks the validation messages the field tables
// of docs/configuration.md quote (`config: <path>: <message>`, the last
// column of a field's row): each message is one the code can write (a
// format string of the package, or a concatenation, with any values), and
// its path is the row's field or inside it.
func TestConfigFieldMessages(t *testing.T) {
	formats := messageFormats(t)
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("`config: ([^` ]+): ([^`]*)`")
	checked := 0
	for _, line := range strings.Split(string(b), "\n") {
		row := docRow.FindStringSubmatch(line)
		if row == nil {
			continue
		}
		field := row[1]
		for _, m := range quoted.FindAllStringSubmatch(line, -1) {
			path, msg := m[1], m[2]
			if path == "line" || strings.HasPrefix(path, "line") {
				continue
			}
			checked++
			if p := indexes.ReplaceAllString(path, "[]"); p != field && !strings.HasPrefix(p, field+".") && !strings.HasPrefix(p, field+"[]") {
				t.Errorf("%s: the row of %s quotes a message about %s", configDoc, field, path)
			}
			found := false
			for _, f := range formats {
				if f.MatchString(msg) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: the row of %s quotes %q, which the code does not write", configDoc, field, msg)
			}
		}
	}
	if checked < 20 {
		t.Errorf("%s: %d messages checked, want the field tables' messages", configDoc, checked)
	}
}
