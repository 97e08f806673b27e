package templatetest

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// opsSection returns the text of docs/operations.md from the line starting
// with start up to the next heading of any level.
func opsSection(t *testing.T, start string) string {
	t.Helper()
	b, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, start)
	if i < 0 {
		t.Fatalf("%s: no %q", operationsDoc, start)
	}
	s := doc[i+len(start):]
	if j := strings.Index(s, "\n#"); j >= 0 {
		s = s[:j]
	}
	return s
}

var (
	firstCell = regexp.MustCompile(`(?m)^\| ([^|]+) \|`)
	codeName  = regexp.MustCompile("`([A-Za-z][A-Za-z0-9]*)`")
)

// tableNames returns the backquoted names in the first cells of the
// section's table rows (but a function's "`X` event"), each with its row.
func tableNames(section string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		m := firstCell.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, n := range codeName.FindAllStringSubmatch(m[1], -1) {
			if !strings.Contains(m[1], n[0]+" event") { // a function's event, not a resource
				out[n[1]] = line
			}
		}
	}
	return out
}

// TestOperationsListsTheStack fails when docs/operations.md's table of
// what gets deployed, its parameters table (with their defaults) or its
// list of outputs differ from template.yaml's resources, parameters and
// outputs.
func TestOperationsListsTheStack(t *testing.T) {
	tpl := load(t)
	var resources []string
	for id := range tpl.raw["Resources"].(map[string]any) {
		resources = append(resources, id)
	}
	sort.Strings(resources)
	documented := tableNames(opsSection(t, "## What gets deployed"))
	for _, id := range resources {
		if _, ok := documented[id]; !ok {
			t.Errorf("%s, \"What gets deployed\": resource %s is not listed", operationsDoc, id)
		}
	}
	for name := range documented {
		if !slices.Contains(resources, name) {
			t.Errorf("%s, \"What gets deployed\": %s is not a resource of template.yaml", operationsDoc, name)
		}
	}

	params, _ := tpl.raw["Parameters"].(map[string]any)
	rows := tableNames(opsSection(t, "Parameters:"))
	for name, p := range params {
		row, ok := rows[name]
		if !ok {
			t.Errorf("%s: parameter %s is not in the parameters table", operationsDoc, name)
			continue
		}
		def, _ := p.(map[string]any)["Default"]
		if s := fmt.Sprint(def); s != "" && !strings.Contains(row, "`"+s+"`") {
			t.Errorf("%s: parameter %s: the table's row does not give its default `%s`: %s", operationsDoc, name, s, row)
		}
	}
	for name := range rows {
		if _, ok := params[name]; !ok {
			t.Errorf("%s: the parameters table lists %s, which template.yaml does not have", operationsDoc, name)
		}
	}

	outputs, _ := tpl.raw["Outputs"].(map[string]any)
	said := opsSection(t, "The stack's outputs are")
	said = said[:strings.Index(said, ":\n")]
	var named []string
	for _, m := range codeName.FindAllStringSubmatch(said, -1) {
		named = append(named, m[1])
	}
	var want []string
	for o := range outputs {
		want = append(want, o)
	}
	sort.Strings(want)
	sort.Strings(named)
	if !slices.Equal(named, want) {
		t.Errorf("%s: the stack's outputs are said to be %v; template.yaml has %v", operationsDoc, named, want)
	}
}
