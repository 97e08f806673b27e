package catalog_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// codeSpan matches a Markdown code span in one backquote, or in two with
// spaces inside (for text holding a backquote).
var codeSpan = regexp.MustCompile("``\\s(.+?)\\s``|`([^`]+)`")

// codeSpans returns the code spans of a table cell, in order.
func codeSpans(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// TestConfigErrorExamples parses the config of each row of the doc's
// "Errors that any field can give" table (each code span of its config
// cell a line) and checks the error is the message the row quotes, so that
// the doc's field lists and messages are the code's.
func TestConfigErrorExamples(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "Errors that any field can give")
	if start < 0 {
		t.Fatalf("%s: no \"Errors that any field can give\" table", configDoc)
	}
	section := doc[start:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) != 3 || cells[0] == "problem" {
			continue
		}
		rows++
		config := strings.Join(codeSpans(cells[1]), "\n")
		want := codeSpans(cells[2])
		if config == "" || len(want) != 1 {
			t.Errorf("%s: row %q: want a config and one quoted message", configDoc, cells[0])
			continue
		}
		_, err := catalog.Parse([]byte(config))
		if err == nil {
			t.Errorf("%s: %s: the config parses without error:\n%s", configDoc, cells[0], config)
			continue
		}
		if err.Error() != want[0] {
			t.Errorf("%s: %s: the doc quotes\n%s\nthe code says\n%s", configDoc, cells[0], want[0], err)
		}
	}
	if rows < 5 {
		t.Errorf("%s: %d error examples, want the table's rows", configDoc, rows)
	}
}
