package catalog_test

import (
	"bufio"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// configDoc is the config reference. It lists each field as the first cell
// of a table row: "| `server.max_in_flight` | ...", list items as
// "providers[].name".
const configDoc = "../../docs/configuration.md"

// configPaths returns the dotted path of every YAML field of t, nested
// structs and the elements of slices included ("providers",
// "providers[].simulated", "providers[].simulated.words", ...), in
// declaration order.
func configPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" {
			if strings.Contains(opts, "inline") && ft.Kind() == reflect.Struct {
				out = append(out, configPaths(ft, prefix)...)
			}
			continue
		}
		path := prefix + name
		out = append(out, path)
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, configPaths(ft, path+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configPaths(ft.Elem(), path+"[].")...)
		}
	}
	return out
}

// docRow matches a table row whose first cell is one backquoted name.
var docRow = regexp.MustCompile("^\\| `([^`]+)` \\|")

// documentedFields returns the first cells of the doc's table rows that are
// config paths: those under one of the config's top-level fields (the
// per-request "gateway." and "provider." rows and the environment
// variables are not).
func documentedFields(t *testing.T, top []string) map[string]int {
	t.Helper()
	f, err := os.Open(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]int{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		m := docRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		first, _, _ := strings.Cut(m[1], ".")
		first, _, _ = strings.Cut(first, "[")
		for _, name := range top {
			if first == name {
				rows[m[1]] = line
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestConfigDocListsEveryField fails when a config struct has a YAML field
// that docs/configuration.md does not list, or when the doc lists a config
// field the structs do not have: the reference must neither miss a field
// nor promise one that the parser refuses.
func TestConfigDocListsEveryField(t *testing.T) {
	cfg := reflect.TypeFor[catalog.Config]()
	paths := configPaths(cfg, "")
	var top []string
	for _, p := range paths {
		if !strings.ContainsAny(p, ".[") {
			top = append(top, p)
		}
	}
	if len(top) == 0 {
		t.Fatal("catalog.Config has no YAML fields")
	}
	doc := documentedFields(t, top)
	known := map[string]bool{}
	for _, p := range paths {
		known[p] = true
		if _, ok := doc[p]; !ok {
			t.Errorf("%s: config field `%s` is not documented: add a table row starting \"| `%s` |\" with its type, default, meaning and error", configDoc, p, p)
		}
	}
	for p, line := range doc {
		if !known[p] {
			t.Errorf("%s:%d: `%s` is documented as a config field, but catalog.Config has no such field", configDoc, line, p)
		}
	}
}

// TestConfigPaths pins the walk itself on a few fields of each shape, so
// that a broken walk cannot pass by finding nothing.
func TestConfigPaths(t *testing.T) {
	got := map[string]bool{}
	for _, p := range configPaths(reflect.TypeFor[catalog.Config](), "") {
		got[p] = true
	}
	for _, want := range []string{
		"providers", "providers[].name", "providers[].simulated", "providers[].simulated.words",
		"models[].routes", "models[].routes[].input_price",
		"projects[].balance", "projects[].keys[].limit",
		"idempotency.window", "server.max_in_flight", "health.cooldown",
	} {
		if !got[want] {
			t.Errorf("configPaths misses %s", want)
		}
	}
	for p := range got {
		if strings.Contains(p, "idx") {
			t.Errorf("configPaths lists the unexported %s", p)
		}
	}
}
