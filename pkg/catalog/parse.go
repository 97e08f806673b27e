package catalog

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed demo.yaml
var demoYAML []byte

// Demo returns the embedded demo config (demo.yaml): simulated providers, a
// demo project and the demo key, so the gateway runs with no accounts and no
// network. Each call returns a fresh Config that the caller may change.
// demo.yaml is part of the binary and a test parses it, so a failure here is
// a build defect and panics.
func Demo() *Config {
	c, err := Parse(demoYAML)
	if err != nil {
		panic("catalog: embedded demo.yaml is invalid: " + err.Error())
	}
	return c
}

// Load reads the config file at path and parses it (see Parse). The error
// names the path; a problem in the file's content wraps a *FieldError.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		// The *fs.PathError already names the path ("open x.yaml: ...").
		return nil, fmt.Errorf("load config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a YAML config strictly (an unknown or misspelt field is an
// error, as is a second YAML document), applies the defaults (see
// ApplyDefaults) and validates the result (see Validate). Every error is a
// *FieldError naming the first problem; problems found while decoding also
// carry the line.
func Parse(data []byte) (*Config, error) {
	// First pass: the node tree. It reports syntax errors, and it lets the
	// second pass's errors, which only carry a line, be turned into the path
	// of the field they are about.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &FieldError{Line: extra.Line, Message: "a second YAML document: the config must be a single document (remove the '---' separator)"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(err)
	}

	// Second pass: decode into Config. yaml.Node.Decode cannot be told to
	// reject unknown fields, so decode the bytes again.
	var c Config
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, decodeError(err, &root)
	}
	if err := checkWholeNumbers(walk(&root)); err != nil {
		return nil, err
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

var (
	// yaml.v3 messages: "yaml: line 3: did not find expected key".
	reYAMLLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	// Decoder type errors, one per line of a *yaml.TypeError.
	reUnknownField = regexp.MustCompile(`^field (.*) not found in type (\S+)$`)
	reFieldTwice   = regexp.MustCompile(`^field (.*) already set in type (\S+)$`)
	reKeyTwice     = regexp.MustCompile(`^mapping key ("(?:[^"\\]|\\.)*") already defined at line (\d+)$`)
	reCannot       = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (\\S+)$")
	// Duration's own messages (duration.go).
	reDuration = regexp.MustCompile(`^invalid duration ("(?:[^"\\]|\\.)*")`)
	// A value quoted by yaml.v3, removed where it could be a secret.
	reQuoted = regexp.MustCompile(" ?`[^`]*`")
	// The part of a path that holds API keys.
	reKeysPath = regexp.MustCompile(`^projects\[\d+\]\.keys(\[|$)`)
)

// syntaxError turns an error of the first (syntax) pass into a *FieldError.
func syntaxError(err error) *FieldError {
	msg := err.Error()
	if m := reYAMLLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{Line: line, Message: m[2]}
	}
	return &FieldError{Message: strings.TrimPrefix(msg, "yaml: ")}
}

// decodeError turns an error of the second (typed, strict) pass into a
// *FieldError for the first problem, naming the field by its path when the
// line leads to it in root.
func decodeError(err error, root *yaml.Node) *FieldError {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		// Errors that stop the decoder outright carry no line; they may
		// quote a value, which could be a key, so drop quoted values.
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		return &FieldError{Message: reQuoted.ReplaceAllString(msg, "")}
	}
	first := te.Errors[0]
	m := reYAMLLine.FindStringSubmatch(first)
	if m == nil {
		return &FieldError{Message: reQuoted.ReplaceAllString(first, "")}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	fe := &FieldError{Line: line, Message: msg}
	entries := walk(root)

	if m := reUnknownField.FindStringSubmatch(msg); m != nil {
		name, typ := m[1], m[2]
		path, ok := locateKey(entries, line, name)
		if !ok {
			fe.Message = reQuoted.ReplaceAllString(msg, "")
			return fe
		}
		known := ""
		if names := knownFields[typ]; len(names) > 0 {
			known = "; want one of " + strings.Join(names, ", ")
		}
		if reKeysPath.MatchString(path) {
			// A key pasted as a field name ("- sk-live-...: 5") must not be
			// echoed: name the enclosing item instead.
			fe.Path = strings.TrimSuffix(path, "."+name)
			fe.Message = "unknown field (name not shown: it may be a key)" + known
			return fe
		}
		fe.Path = path
		fe.Message = fmt.Sprintf("unknown field %q", name) + known
		return fe
	}
	if m := reFieldTwice.FindStringSubmatch(msg); m != nil {
		return twice(fe, entries, m[1], "")
	}
	if m := reKeyTwice.FindStringSubmatch(msg); m != nil {
		name, err := strconv.Unquote(m[1])
		if err != nil {
			fe.Message = "a field is given twice"
			return fe
		}
		return twice(fe, entries, name, m[2])
	}
	if m := reCannot.FindStringSubmatch(msg); m != nil {
		tag, value, typ := m[1], m[2], m[3]
		hint, prefix := value, false
		if v, ok := strings.CutSuffix(value, "..."); ok {
			hint, prefix = v, true
		}
		path, ok := locateValue(entries, line, tagKind(tag), typ, hint, prefix)
		fe.Path = path
		got := describeValue(tag, value)
		if !ok || reKeysPath.MatchString(path) || strings.HasSuffix(typ, "catalog.Key") {
			got = describeValue(tag, "")
		}
		fe.Message = "want " + describeType(typ) + ", got " + got
		return fe
	}
	if m := reDuration.FindStringSubmatch(msg); m != nil {
		hint, _ := strconv.Unquote(m[1])
		fe.Path, _ = locateValue(entries, line, yaml.ScalarNode, durationType.String(), hint, false)
		return fe
	}
	if strings.HasPrefix(msg, "want a duration") {
		// A list or mapping where a duration belongs.
		fe.Path, _ = locateValue(entries, line, 0, durationType.String(), "", false)
		return fe
	}
	fe.Message = reQuoted.ReplaceAllString(msg, "")
	return fe
}

// twice reports a field given twice in one mapping; firstLine is where it
// was first given, when known.
func twice(fe *FieldError, entries []entry, name, firstLine string) *FieldError {
	path, ok := locateKey(entries, fe.Line, name)
	if !ok || reKeysPath.MatchString(path) {
		// Unknown place, or a name that may be a pasted key: do not echo it.
		fe.Path = ""
		if ok {
			fe.Path = strings.TrimSuffix(path, "."+name)
		}
		fe.Message = "a field is given twice"
	} else {
		fe.Path = path
		fe.Message = "field given twice"
	}
	if firstLine != "" {
		fe.Message += " (first at line " + firstLine + ")"
	}
	return fe
}

// checkWholeNumbers rejects a fraction where the config wants a whole number
// ("max_in_flight: 1.5"), which yaml.v3 would silently truncate. A float with
// no fraction ("1e6") is fine: nothing is lost.
func checkWholeNumbers(entries []entry) *FieldError {
	for _, e := range entries {
		if e.typ == nil || e.value.Kind != yaml.ScalarNode || e.value.ShortTag() != "!!float" {
			continue
		}
		switch e.typ.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		default:
			continue
		}
		if f, err := strconv.ParseFloat(strings.ReplaceAll(e.value.Value, "_", ""), 64); err == nil && f == math.Trunc(f) {
			continue
		}
		return &FieldError{Path: e.path, Line: e.value.Line, Message: "want a whole number, got `" + e.value.Value + "`"}
	}
	return nil
}

// entry is a node of the YAML tree with its config path and the Go type the
// decoder puts it in (nil where the config has no such field), in document
// order.
type entry struct {
	path  string
	typ   reflect.Type
	key   *yaml.Node // nil for a list item
	value *yaml.Node
}

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[Duration]()
)

// walk lists the entries under root. Aliases are not followed: their
// targets are listed where they are defined, and following them could blow
// up exponentially ("billion laughs").
func walk(root *yaml.Node) []entry {
	var out []entry
	var visit func(n *yaml.Node, path string, t reflect.Type)
	visit = func(n *yaml.Node, path string, t reflect.Type) {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				visit(c, path, t)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				ft := fieldType(t, k.Value)
				out = append(out, entry{path: p, typ: ft, key: k, value: v})
				visit(v, p, ft)
			}
		case yaml.SequenceNode:
			var et reflect.Type
			if t != nil && t.Kind() == reflect.Slice {
				et = t.Elem()
			}
			for i, v := range n.Content {
				p := path + "[" + strconv.Itoa(i) + "]"
				out = append(out, entry{path: p, typ: et, value: v})
				visit(v, p, et)
			}
		}
	}
	visit(root, "", configType)
	return out
}

// fieldType is the type of t's field tagged yaml:"name", or nil.
func fieldType(t reflect.Type, name string) reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && tag == name {
			return f.Type
		}
	}
	return nil
}

// locateKey finds the path of the mapping key name on line.
func locateKey(entries []entry, line int, name string) (string, bool) {
	for _, e := range entries {
		if e.key != nil && e.key.Line == line && e.key.Value == name {
			return e.path, true
		}
	}
	return "", false
}

// locateValue finds the path of the value on line, of the given node kind
// (0: any), that the decoder was putting into a Go value of type typ (as the
// decoder names it, e.g. "float64" or "[]catalog.Route") and whose text is
// hint (or starts with it, when prefix). Without a hint, or when none
// matches, the first such value on the line wins: two only share a line in
// flow style.
func locateValue(entries []entry, line int, kind yaml.Kind, typ, hint string, prefix bool) (string, bool) {
	typ = strings.TrimPrefix(typ, "*")
	firstOnLine, found := "", false
	for _, e := range entries {
		if e.value.Line != line || (kind != 0 && e.value.Kind != kind) ||
			e.typ == nil || strings.TrimPrefix(e.typ.String(), "*") != typ {
			continue
		}
		v := e.value.Value
		if hint == "" || v == hint || (prefix && strings.HasPrefix(v, hint)) {
			return e.path, true
		}
		if !found {
			firstOnLine, found = e.path, true
		}
	}
	return firstOnLine, found
}

func describeType(typ string) string {
	switch strings.TrimPrefix(typ, "*") {
	case "float64", "float32":
		return "a number"
	case "int", "int64", "int32", "uint", "uint64":
		return "a whole number"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	}
	if strings.HasPrefix(typ, "[]") {
		return "a list"
	}
	if strings.HasPrefix(typ, "catalog.") {
		return "a mapping"
	}
	return typ
}

// tagKind is the node kind a yaml.v3 short tag stands for.
func tagKind(tag string) yaml.Kind {
	switch tag {
	case "!!seq":
		return yaml.SequenceNode
	case "!!map":
		return yaml.MappingNode
	}
	return yaml.ScalarNode
}

// describeValue names what the YAML held: its text when given, else its kind.
func describeValue(tag, value string) string {
	switch {
	case tag == "!!seq":
		return "a list"
	case tag == "!!map":
		return "a mapping"
	case value != "":
		return "`" + value + "`"
	case tag == "!!str":
		return "a string"
	case tag == "!!int" || tag == "!!float":
		return "a number"
	case tag == "!!bool":
		return "true or false"
	}
	return "a value"
}

// knownFields lists the YAML field names of each config struct by the type
// name the decoder uses in its messages ("catalog.Provider"), so that an
// unknown-field error can show the fields that would be accepted.
var knownFields = func() map[string][]string {
	types := []any{Config{}, Provider{}, Simulated{}, Model{}, Route{}, Project{}, Key{}, Idempotency{}, Server{}, Health{}}
	out := make(map[string][]string, len(types))
	for _, v := range types {
		t := reflect.TypeOf(v)
		var names []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if f.IsExported() && name != "" && name != "-" {
				names = append(names, name)
			}
		}
		out[t.String()] = names
	}
	return out
}()
