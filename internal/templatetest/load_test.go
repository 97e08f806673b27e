package templatetest

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"go.yaml.in/yaml/v3"

	"github.com/buzzgate/buzzgate/internal/samtemplate"
)

// Files under test, relative to this package.
const (
	templatePath = "../../template.yaml"
	makefilePath = "../../Makefile"
	configPath   = "../../deploy/config.yaml"
)

// storeDirs hold the code that calls DynamoDB from the function: the
// idempotency store and the ledger share the one table.
var storeDirs = []string{"../../pkg/idempotency/dynamostore", "../../pkg/billing/dynamoledger"}

// template is template.yaml read twice:
//
//   - raw: the YAML as plain maps, lists and scalars, with the short-form
//     intrinsics in their long form (!Ref X is {"Ref": "X"}, !GetAtt A.B is
//     {"Fn::GetAtt": ["A", "B"]}, !Sub s is {"Fn::Sub": s}). Checks that are
//     about what refers to what read this.
//   - cf: goformation's typed template. goformation resolves intrinsics as
//     it parses (a Ref to a resource or a GetAtt reads as "" or nil, a Ref to
//     a parameter as its default) and does not apply Globals, so it serves
//     the checks of literal values only.
type template struct {
	raw map[string]any
	cf  *cloudformation.Template
}

// goformationUnknown lists the properties, by resource type, that
// goformation v7.14.9 (the latest release) does not know or types wrongly.
// Its decoder rejects such a property and with it the whole template, so
// loadTemplate removes these before goformation parses; the raw tree keeps
// them and the tests check them there. A "*" in a path stands for every key
// of a mapping (every event of a function).
var goformationUnknown = map[string][][]string{
	// Response streaming for REST APIs (November 2025), and an Api event's
	// integration timeout, which goformation's ApiEvent lacks.
	"AWS::ApiGateway::Method":   {{"Integration", "ResponseTransferMode"}},
	"AWS::Serverless::Function": {{"Events", "*", "Properties", "ResponseTransferMode"}, {"Events", "*", "Properties", "TimeoutInMillis"}},
	// goformation types GatewayResponses as a map of strings; SAM's is a
	// map of objects (StatusCode, ResponseParameters, ResponseTemplates).
	"AWS::Serverless::Api": {{"GatewayResponses"}},
}

var loadTemplate = sync.OnceValues(func() (*template, error) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", templatePath, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want one YAML mapping", templatePath)
	}
	raw, err := samtemplate.Value(&root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", templatePath, err)
	}

	removeUnknown(root.Content[0])
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	cf, err := goformation.ParseYAML(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: goformation: %w", templatePath, err)
	}
	return &template{raw: raw.(map[string]any), cf: cf}, nil
})

func load(t *testing.T) *template {
	t.Helper()
	tpl, err := loadTemplate()
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// removeUnknown deletes the goformationUnknown properties from the
// template's node tree.
func removeUnknown(doc *yaml.Node) {
	resources := mappingValue(doc, "Resources")
	if resources == nil || resources.Kind != yaml.MappingNode {
		return
	}
	for i := 1; i < len(resources.Content); i += 2 {
		res := resources.Content[i]
		typ := mappingValue(res, "Type")
		if typ == nil {
			continue
		}
		for _, path := range goformationUnknown[typ.Value] {
			removePath(mappingValue(res, "Properties"), path)
		}
	}
}

// removePath deletes the key at path below n; "*" matches every key.
func removePath(n *yaml.Node, path []string) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	if len(path) == 1 {
		deleteKey(n, path[0])
		return
	}
	if path[0] != "*" {
		removePath(mappingValue(n, path[0]), path[1:])
		return
	}
	for i := 1; i < len(n.Content); i += 2 {
		removePath(n.Content[i], path[1:])
	}
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func deleteKey(n *yaml.Node, key string) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
			return
		}
	}
}

// get walks the raw tree by map keys; nil when a key is missing.
var get = samtemplate.Get

// resources returns the logical ids of the raw template's resources of type
// typ, sorted.
func (tpl *template) resources(typ string) []string {
	var ids []string
	for id, r := range tpl.raw["Resources"].(map[string]any) {
		if get(r, "Type") == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// props returns the raw Properties of resource id.
func (tpl *template) props(id string) map[string]any {
	p, _ := get(tpl.raw, "Resources", id, "Properties").(map[string]any)
	return p
}

// one returns the logical id of the one resource of type typ.
func (tpl *template) one(t *testing.T, typ string) string {
	t.Helper()
	ids := tpl.resources(typ)
	if len(ids) != 1 {
		t.Fatalf("want exactly one %s, got %d: %v", typ, len(ids), ids)
	}
	return ids[0]
}

// isRef reports whether v is {"Ref": target}.
func isRef(v any, target string) bool {
	return get(v, "Ref") == target && len(v.(map[string]any)) == 1
}

// isGetAtt reports whether v is {"Fn::GetAtt": [res, attr]}.
func isGetAtt(v any, res, attr string) bool {
	args, ok := get(v, "Fn::GetAtt").([]any)
	return ok && len(args) == 2 && args[0] == res && args[1] == attr
}

// subText returns the template string of a {"Fn::Sub": ...}, or of a plain
// string; ok is false for anything else.
func subText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case map[string]any:
		switch s := v["Fn::Sub"].(type) {
		case string:
			return s, len(v) == 1
		case []any:
			if len(s) > 0 {
				text, ok := s[0].(string)
				return text, ok && len(v) == 1
			}
		}
	}
	return "", false
}

// strings returns v as a list of strings: a string is a list of one.
func stringList(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// list returns v as a list: a single value is a list of one.
func list(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}
