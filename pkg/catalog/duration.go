package catalog

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// String formats d as a Go duration string ("30s"), the form the config uses.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a Go duration string such as "30s", "250ms" or "24h".
// A negative duration, a list or mapping, or anything time.ParseDuration
// rejects is an error. A bare 0 is accepted (it means "unset", so the field's
// default applies); other bare numbers are rejected because their unit would
// be a guess. An empty value (YAML null) never reaches this method: the
// decoder leaves the field zero, which also means "use the default".
//
// Errors are returned as *yaml.TypeError carrying the line, so that the
// decoder keeps going and reports problems in document order; Parse turns
// them into a *FieldError naming the field.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return durationError(node, "want a duration such as \"30s\", got a "+kindName(node.Kind))
	}
	v, err := time.ParseDuration(node.Value)
	if err != nil {
		return durationError(node, fmt.Sprintf("invalid duration %q: want a Go duration such as \"30s\", \"250ms\" or \"24h\"", node.Value))
	}
	if v < 0 {
		return durationError(node, fmt.Sprintf("invalid duration %q: must not be negative", node.Value))
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d back as a duration string, so that a marshalled
// Config parses again to the same values.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func durationError(node *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", node.Line, msg)}}
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	default:
		return "value"
	}
}
