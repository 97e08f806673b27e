package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// units is the unit each metric must be published with (the contract with
// the SAM template and the dashboard), written out independently of the
// package's constants.
var units = map[string]string{
	"Requests":               "Count",
	"Replays":                "Count",
	"IdempotencyConflicts":   "Count",
	"ReplayUnavailable":      "Count",
	"IdempotencyInProgress":  "Count",
	"IdempotencyStoreErrors": "Count",
	"Fallbacks":              "Count",
	"RouteDepth":             "None",
	"ProviderErrors":         "Count",
	"ProviderConfigErrors":   "Count",
	"Latency":                "Milliseconds",
	"TimeToFirstToken":       "Milliseconds",
	"Cost":                   "None",
	"ProjectRequests":        "Count",
	"ProjectCost":            "None",
	"BudgetRefusals":         "Count",
	"BalanceRefusals":        "Count",
	"RateLimited":            "Count",
	"Errors5xx":              "Count",
	"PairRequests":           "Count",
	"PassThrough":            "Count",
	"DroppedFields":          "Count",
}

// validUnits are CloudWatch's StandardUnit values, as the EMF
// specification's schema lists them.
var validUnits = map[string]bool{}

func init() {
	for _, u := range strings.Split("Seconds Microseconds Milliseconds Bytes Kilobytes Megabytes Gigabytes Terabytes "+
		"Bits Kilobits Megabits Gigabits Terabits Percent Count Bytes/Second Kilobytes/Second Megabytes/Second "+
		"Gigabytes/Second Terabytes/Second Bits/Second Kilobits/Second Megabits/Second Gigabits/Second "+
		"Terabits/Second Count/Second None", " ") {
		validUnits[u] = true
	}
}

// validateEMF checks one line against the EMF specification: a JSON object
// alone on its line; an "_aws" object with an integer Timestamp and a
// non-empty CloudWatchMetrics array and nothing else; each MetricDirective
// with a Namespace (1 to 255 characters), at least one DimensionSet, and
// Metrics (at most 100) and nothing else; each DimensionSet at most 30
// names, each naming a top-level string member that is a valid CloudWatch
// dimension value; each MetricDefinition with a Name (1 to 255 characters)
// naming a top-level number or array of at most 100 numbers, an optional
// valid Unit, and nothing else; no metric defined twice in one document.
func validateEMF(line []byte) error {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return fmt.Errorf("line does not end in a newline")
	}
	if bytes.IndexByte(line, '\n') != len(line)-1 {
		return fmt.Errorf("line holds more than one newline")
	}
	if !json.Valid(line) {
		return fmt.Errorf("not valid JSON: %q", line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("data after the object")
	}
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return fmt.Errorf(`no "_aws" object`)
	}
	if err := members(aws, []string{"Timestamp", "CloudWatchMetrics"}, nil); err != nil {
		return fmt.Errorf("_aws: %v", err)
	}
	ts, ok := aws["Timestamp"].(json.Number)
	if !ok {
		return fmt.Errorf("Timestamp is not a number")
	}
	if _, err := ts.Int64(); err != nil {
		return fmt.Errorf("Timestamp %s is not an integer of milliseconds", ts)
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		return fmt.Errorf("CloudWatchMetrics is not a non-empty array")
	}
	defined := map[string]bool{}
	for _, d := range directives {
		dir, ok := d.(map[string]any)
		if !ok {
			return fmt.Errorf("a MetricDirective is not an object")
		}
		if err := members(dir, []string{"Namespace", "Dimensions", "Metrics"}, nil); err != nil {
			return fmt.Errorf("MetricDirective: %v", err)
		}
		if ns, ok := dir["Namespace"].(string); !ok || len(ns) == 0 || len(ns) > 255 {
			return fmt.Errorf("Namespace %v is not a string of 1 to 255 characters", dir["Namespace"])
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok || len(sets) == 0 {
			return fmt.Errorf("Dimensions is not a non-empty array")
		}
		for _, s := range sets {
			set, ok := s.([]any)
			if !ok {
				return fmt.Errorf("a DimensionSet is not an array")
			}
			if len(set) > 30 {
				return fmt.Errorf("a DimensionSet has %d dimensions, more than 30", len(set))
			}
			for _, n := range set {
				name, ok := n.(string)
				if !ok || name == "" || len(name) > 255 {
					return fmt.Errorf("dimension name %v is not a string of 1 to 255 characters", n)
				}
				v, ok := root[name].(string)
				if !ok {
					return fmt.Errorf("dimension %q has no top-level string member", name)
				}
				if err := validDimensionValue(v); err != nil {
					return fmt.Errorf("dimension %q: %v", name, err)
				}
			}
		}
		defs, ok := dir["Metrics"].([]any)
		if !ok {
			return fmt.Errorf("Metrics is not an array")
		}
		if len(defs) > 100 {
			return fmt.Errorf("%d metrics in one directive, more than 100", len(defs))
		}
		for _, m := range defs {
			def, ok := m.(map[string]any)
			if !ok {
				return fmt.Errorf("a MetricDefinition is not an object")
			}
			if err := members(def, []string{"Name"}, []string{"Unit", "StorageResolution"}); err != nil {
				return fmt.Errorf("MetricDefinition: %v", err)
			}
			name, ok := def["Name"].(string)
			if !ok || name == "" || len(name) > 255 {
				return fmt.Errorf("metric name %v is not a string of 1 to 255 characters", def["Name"])
			}
			if defined[name] {
				return fmt.Errorf("metric %q defined twice", name)
			}
			defined[name] = true
			if u, present := def["Unit"]; present {
				if s, ok := u.(string); !ok || !validUnits[s] {
					return fmt.Errorf("metric %q: unit %v is not a CloudWatch unit", name, u)
				}
			}
			switch v := root[name].(type) {
			case json.Number:
			case []any:
				if len(v) > 100 {
					return fmt.Errorf("metric %q has %d values, more than 100", name, len(v))
				}
				for _, x := range v {
					if _, ok := x.(json.Number); !ok {
						return fmt.Errorf("metric %q: value %v is not a number", name, x)
					}
				}
			default:
				return fmt.Errorf("metric %q has no top-level number or array of numbers (%v)", name, v)
			}
		}
	}
	return nil
}

// members checks that obj has the required members and no others than
// those and the optional ones (the specification's objects "MUST NOT
// contain any additional members").
func members(obj map[string]any, required, optional []string) error {
	for _, r := range required {
		if _, ok := obj[r]; !ok {
			return fmt.Errorf("missing member %q", r)
		}
	}
	for k := range obj {
		found := false
		for _, a := range append(required, optional...) {
			found = found || k == a
		}
		if !found {
			return fmt.Errorf("unexpected member %q", k)
		}
	}
	return nil
}

// validDimensionValue applies CloudWatch's Dimension rules.
func validDimensionValue(v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("value %q has no non-whitespace character", v)
	}
	if len(v) > 1024 {
		return fmt.Errorf("value is %d characters, more than 1024", len(v))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return fmt.Errorf("value %q holds a character that is not printable ASCII", v)
		}
	}
	return nil
}

// line is one decoded EMF line, for comparison.
type line struct {
	Namespace  string
	Dimensions [][]string
	Metrics    []definition
	// Members are the top-level members other than "_aws": the dimension
	// values (strings) and the metric values (float64).
	Members map[string]any
}

type definition struct{ Name, Unit string }

// decode splits out into lines, validates each, and decodes it. It also
// returns each line's timestamp.
func decode(t *testing.T, out []byte) ([]line, []int64) {
	t.Helper()
	var lines []line
	var stamps []int64
	for _, raw := range bytes.SplitAfter(out, []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		if err := validateEMF(raw); err != nil {
			t.Fatalf("line %s: %v", raw, err)
		}
		var doc struct {
			AWS struct {
				Timestamp         int64
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []definition
				}
			} `json:"_aws"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("line %s: %v", raw, err)
		}
		if n := len(doc.AWS.CloudWatchMetrics); n != 1 {
			t.Fatalf("line %s: %d directives, want 1", raw, n)
		}
		var members map[string]any
		if err := json.Unmarshal(raw, &members); err != nil {
			t.Fatal(err)
		}
		delete(members, "_aws")
		d := doc.AWS.CloudWatchMetrics[0]
		lines = append(lines, line{d.Namespace, d.Dimensions, d.Metrics, members})
		stamps = append(stamps, doc.AWS.Timestamp)
	}
	return lines, stamps
}

// mainLine is the expected request line: the base values (Requests 1,
// every other count 0), changed by set (a nil value removes a member). Its
// Metrics are the numeric members, with the units of the units table.
func mainLine(stage string, set map[string]any) line {
	m := map[string]any{
		"Stage":                  stage,
		"Requests":               1.0,
		"Replays":                0.0,
		"IdempotencyConflicts":   0.0,
		"ReplayUnavailable":      0.0,
		"IdempotencyInProgress":  0.0,
		"IdempotencyStoreErrors": 0.0,
		"Fallbacks":              0.0,
		"ProviderErrors":         0.0,
		"Errors5xx":              0.0,
		"Latency":                0.0,
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage"}}, Members: m})
}

func providerLine(stage, provider string, errors float64) line {
	return withDefinitions(line{
		Namespace:  "Buzzgate",
		Dimensions: [][]string{{"Stage", "Provider"}},
		Members:    map[string]any{"Stage": stage, "Provider": provider, "ProviderErrors": errors},
	})
}

func withDefinitions(l line) line {
	for k, v := range l.Members {
		if _, ok := v.(float64); ok {
			l.Metrics = append(l.Metrics, definition{k, units[k]})
		}
	}
	return l
}

var sortDefinitions = cmpopts.SortSlices(func(a, b definition) bool { return a.Name < b.Name })

func TestRecord(t *testing.T) {
	weird := "a\"b\\c\nd\te\x01f\u00e9g\u2028h\xffi" // quotes, backslash, controls, non-ASCII, invalid UTF-8
	tests := []struct {
		name  string
		stage string
		req   Request
		want  []line
	}{{
		name:  "plain answer",
		stage: "prod",
		req: Request{Status: 200, Provider: "openai", Latency: 1234 * time.Millisecond,
			TimeToFirstToken: 150 * time.Millisecond, Cost: 0.00125},
		want: []line{mainLine("prod", map[string]any{
			"Latency": 1234.0, "RouteDepth": 0.0, "TimeToFirstToken": 150.0, "Cost": 0.00125,
		})},
	}, {
		name:  "fallback at depth 2 after two providers failed",
		stage: "prod",
		req: Request{Status: 200, Provider: "p2", RouteDepth: 2, FailedProviders: []string{"p0", "p1", "p0"},
			Latency: 3 * time.Second, TimeToFirstToken: 2500 * time.Millisecond, Cost: 0.5},
		want: []line{
			mainLine("prod", map[string]any{
				"Fallbacks": 1.0, "RouteDepth": 2.0, "ProviderErrors": 3.0,
				"Latency": 3000.0, "TimeToFirstToken": 2500.0, "Cost": 0.5,
			}),
			providerLine("prod", "p0", 2),
			providerLine("prod", "p1", 1),
		},
	}, {
		name:  "translated pair with dropped fields",
		stage: "prod",
		req: Request{Status: 200, Provider: "p0", Latency: time.Second, TimeToFirstToken: time.Second,
			ClientAPI: "messages", UpstreamAPI: "openai", Dropped: []string{"context_management", "tools[web_search]"}},
		want: []line{
			mainLine("prod", map[string]any{"Latency": 1000.0, "RouteDepth": 0.0, "TimeToFirstToken": 1000.0}),
			withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage", "ClientAPI", "UpstreamAPI"}},
				Members: map[string]any{"Stage": "prod", "ClientAPI": "messages", "UpstreamAPI": "openai", "PairRequests": 1.0, "PassThrough": 0.0}}),
			withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage", "ClientAPI", "Field"}},
				Members: map[string]any{"Stage": "prod", "ClientAPI": "messages", "Field": "context_management", "DroppedFields": 1.0}}),
			withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage", "ClientAPI", "Field"}},
				Members: map[string]any{"Stage": "prod", "ClientAPI": "messages", "Field": "tools[web_search]", "DroppedFields": 1.0}}),
		},
	}, {
		name:  "pair passed through",
		stage: "prod",
		req: Request{Status: 200, Provider: "p0", Latency: time.Second, TimeToFirstToken: time.Second,
			ClientAPI: "messages", UpstreamAPI: "anthropic", PassThrough: true},
		want: []line{
			mainLine("prod", map[string]any{"Latency": 1000.0, "RouteDepth": 0.0, "TimeToFirstToken": 1000.0}),
			withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage", "ClientAPI", "UpstreamAPI"}},
				Members: map[string]any{"Stage": "prod", "ClientAPI": "messages", "UpstreamAPI": "anthropic", "PairRequests": 1.0, "PassThrough": 1.0}}),
		},
	}, {
		name:  "a project's answer, and its budget refusal",
		stage: "prod",
		req:   Request{Status: 200, Provider: "p0", Latency: time.Second, TimeToFirstToken: time.Second, Cost: 0.25, Project: "acme"},
		want: []line{
			mainLine("prod", map[string]any{"Latency": 1000.0, "RouteDepth": 0.0, "TimeToFirstToken": 1000.0, "Cost": 0.25}),
			withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage", "Project"}},
				Members: map[string]any{"Stage": "prod", "Project": "acme", "ProjectRequests": 1.0, "ProjectCost": 0.25, "BudgetRefusals": 0.0, "BalanceRefusals": 0.0, "RateLimited": 0.0}}),
		},
	}, {
		name:  "a budget refusal",
		stage: "prod",
		req:   Request{Status: 402, Latency: time.Millisecond, Project: "acme", BudgetRefused: true},
		want: []line{
			mainLine("prod", map[string]any{"Latency": 1.0}),
			withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage", "Project"}},
				Members: map[string]any{"Stage": "prod", "Project": "acme", "ProjectRequests": 1.0, "BudgetRefusals": 1.0, "BalanceRefusals": 0.0, "RateLimited": 0.0}}),
		},
	}, {
		name:  "replay",
		stage: "prod",
		req:   Request{Status: 200, Replayed: true, Latency: 12 * time.Millisecond},
		want:  []line{mainLine("prod", map[string]any{"Replays": 1.0, "Latency": 12.0})},
	}, {
		name:  "conflict",
		stage: "prod",
		req:   Request{Status: 409, Conflict: true, Latency: 4 * time.Millisecond},
		want:  []line{mainLine("prod", map[string]any{"IdempotencyConflicts": 1.0, "Latency": 4.0})},
	}, {
		name:  "replay unavailable",
		stage: "prod",
		req:   Request{Status: 409, ReplayUnavailable: true, Latency: 5 * time.Millisecond},
		want:  []line{mainLine("prod", map[string]any{"ReplayUnavailable": 1.0, "Latency": 5.0})},
	}, {
		name:  "in progress",
		stage: "prod",
		req:   Request{Status: 409, InProgress: true, Latency: 6 * time.Millisecond},
		want:  []line{mainLine("prod", map[string]any{"IdempotencyInProgress": 1.0, "Latency": 6.0})},
	}, {
		name:  "store error",
		stage: "prod",
		req:   Request{Status: 503, StoreError: true, Latency: 7 * time.Millisecond},
		want:  []line{mainLine("prod", map[string]any{"IdempotencyStoreErrors": 1.0, "Errors5xx": 1.0, "Latency": 7.0})},
	}, {
		name:  "502 with no provider",
		stage: "prod",
		req:   Request{Status: 502, FailedProviders: []string{"p0", "p1"}, Latency: 1500 * time.Microsecond},
		want: []line{
			mainLine("prod", map[string]any{"ProviderErrors": 2.0, "Errors5xx": 1.0, "Latency": 1.5}),
			providerLine("prod", "p0", 1),
			providerLine("prod", "p1", 1),
		},
	}, {
		name:  "a configuration error, then an answer",
		stage: "prod",
		req:   Request{Status: 200, Provider: "p1", RouteDepth: 1, FailedProviders: []string{"p0"}, ConfigErrors: []string{"p0"}},
		want: []line{
			mainLine("prod", map[string]any{"ProviderErrors": 1.0, "RouteDepth": 1.0, "Fallbacks": 1.0, "TimeToFirstToken": 0.0}),
			providerLine("prod", "p0", 1),
			withDefinitions(line{Namespace: "Buzzgate", Dimensions: [][]string{{"Stage", "Provider"}},
				Members: map[string]any{"Stage": "prod", "Provider": "p0", "ProviderConfigErrors": 1.0}}),
		},
	}, {
		name:  "status 500",
		stage: "prod",
		req:   Request{Status: 500},
		want:  []line{mainLine("prod", map[string]any{"Errors5xx": 1.0})},
	}, {
		name:  "client disconnect 499",
		stage: "prod",
		req:   Request{Status: 499, Provider: "p0", TimeToFirstToken: time.Nanosecond},
		want: []line{mainLine("prod", map[string]any{
			"RouteDepth": 0.0, "TimeToFirstToken": 0.000001,
		})},
	}, {
		name:  "odd numbers: negative durations and depth, infinite and NaN cost",
		stage: "prod",
		req:   Request{Status: 200, Provider: "p0", RouteDepth: -1, Latency: -time.Second, TimeToFirstToken: -1, Cost: math.Inf(1)},
		want:  []line{mainLine("prod", map[string]any{"RouteDepth": 0.0, "TimeToFirstToken": 0.0})},
	}, {
		name:  "NaN cost",
		stage: "prod",
		req:   Request{Status: 200, Cost: math.NaN()},
		want:  []line{mainLine("prod", nil)},
	}, {
		name:  "negative cost",
		stage: "prod",
		req:   Request{Status: 200, Cost: -0.5},
		want:  []line{mainLine("prod", nil)},
	}, {
		name:  "tiny and huge values",
		stage: "prod",
		req:   Request{Status: 200, Provider: "p0", RouteDepth: 1 << 40, Cost: 1e-9, Latency: math.MaxInt64},
		want: []line{mainLine("prod", map[string]any{
			"Fallbacks": 1.0, "RouteDepth": float64(1 << 40), "TimeToFirstToken": 0.0, "Cost": 1e-9,
			"Latency": float64(math.MaxInt64) / 1e6,
		})},
	}, {
		name:  "names needing escapes and replacement",
		stage: weird,
		req:   Request{Status: 502, FailedProviders: []string{weird, `q"uo\te`, "\u00e9", "\u00e8", "", "  "}},
		want: []line{
			mainLine(`a"b\c_d_e_f_g_h_i`, map[string]any{"ProviderErrors": 6.0, "Errors5xx": 1.0}),
			providerLine(`a"b\c_d_e_f_g_h_i`, `a"b\c_d_e_f_g_h_i`, 1),
			providerLine(`a"b\c_d_e_f_g_h_i`, `q"uo\te`, 1),
			providerLine(`a"b\c_d_e_f_g_h_i`, "_", 2), // é and è both become "_"
			providerLine(`a"b\c_d_e_f_g_h_i`, "unknown", 2),
		},
	}, {
		name:  "empty stage",
		stage: "",
		req:   Request{Status: 200},
		want:  []line{mainLine("unknown", nil)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			e := NewEMF(&buf, tt.stage)
			before := time.Now().UnixMilli()
			e.Record(tt.req)
			after := time.Now().UnixMilli()
			got, stamps := decode(t, buf.Bytes())
			if diff := cmp.Diff(tt.want, got, sortDefinitions); diff != "" {
				t.Errorf("lines (-want +got):\n%s\n%s", diff, buf.Bytes())
			}
			for i, ts := range stamps {
				if ts < before || ts > after || ts != stamps[0] {
					t.Errorf("line %d: Timestamp %d, want %d..%d and the same on every line", i, ts, before, after)
				}
			}
		})
	}
}

// TestRecordWrites checks that each line is one Write.
func TestRecordWrites(t *testing.T) {
	var w writes
	e := NewEMF(&w, "prod")
	e.Record(Request{Status: 502, FailedProviders: []string{"a", "b", "a", "c"}})
	e.Record(Request{Status: 200, Provider: "a"})
	if len(w) != 5 {
		t.Fatalf("%d writes, want 5 (4 lines, then 1)", len(w))
	}
	for i, p := range w {
		if err := validateEMF(p); err != nil {
			t.Errorf("write %d %s: %v", i, p, err)
		}
	}
}

// writes keeps each Write's bytes. It has no lock: -race reports Writes that
// EMF does not serialise.
type writes [][]byte

func (w *writes) Write(p []byte) (int, error) {
	*w = append(*w, bytes.Clone(p))
	return len(p), nil
}

func TestRecordConcurrent(t *testing.T) {
	const n = 100
	var w writes
	e := NewEMF(&w, "prod")
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Latency i ms identifies the request; its failed providers are
			// named after it, so its lines can be recognised.
			e.Record(Request{
				Status: 200, Provider: "ok", RouteDepth: 2, Latency: time.Duration(i) * time.Millisecond,
				FailedProviders: []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i), fmt.Sprintf("a%d", i)},
			})
		})
	}
	wg.Wait()
	if len(w) != 3*n {
		t.Fatalf("%d writes, want %d", len(w), 3*n)
	}
	got, _ := decode(t, bytes.Join(w, nil))
	seen := map[float64]bool{}
	var requests, providerErrors, fallbacks float64
	for i := 0; i < len(got); i += 3 {
		m := got[i].Members
		id, ok := m["Latency"].(float64)
		if !ok {
			t.Fatalf("line %d is not a request line: %v", i, m)
		}
		if seen[id] {
			t.Fatalf("request %v twice", id)
		}
		seen[id] = true
		requests += m["Requests"].(float64)
		providerErrors += m["ProviderErrors"].(float64)
		fallbacks += m["Fallbacks"].(float64)
		// The request's provider lines follow it.
		want := []line{providerLine("prod", fmt.Sprintf("a%v", id), 2), providerLine("prod", fmt.Sprintf("b%v", id), 1)}
		if diff := cmp.Diff(want, got[i+1:i+3], sortDefinitions); diff != "" {
			t.Errorf("lines after request %v (-want +got):\n%s", id, diff)
		}
	}
	if requests != n || providerErrors != 3*n || fallbacks != n || len(seen) != n {
		t.Errorf("Requests %v, ProviderErrors %v, Fallbacks %v, distinct requests %d; want %d, %d, %d, %d",
			requests, providerErrors, fallbacks, len(seen), n, 3*n, n, n)
	}
}

func TestDiscard(t *testing.T) {
	var r Recorder = Discard{}
	r.Record(Request{Status: 200}) // nothing to see; it must not panic
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `"`, `\`, `a"b\c`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é€𝄞", "日本語",
		"\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "</script>&", strings.Repeat("x\"", 100),
	} {
		got := appendString(nil, s)
		if bytes.ContainsAny(got, "\n\r") {
			t.Errorf("appendString(%q) = %s holds a raw line break", s, got)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("appendString(%q) = %s: %v", s, got, err)
			continue
		}
		if want := string([]rune(s)); back != want { // each invalid byte → U+FFFD
			t.Errorf("appendString(%q) = %s decodes to %q, want %q", s, got, back, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\n\u2028", "é\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", s, got, err)
		}
		if want := string([]rune(s)); back != want {
			t.Fatalf("appendString(%q) decodes to %q, want %q", s, back, want)
		}
		if bytes.IndexByte(got, '\n') >= 0 {
			t.Fatalf("appendString(%q) = %s holds a raw newline", s, got)
		}
	})
}

func TestDimensionValue(t *testing.T) {
	long := strings.Repeat("x", 1025)
	for _, tt := range []struct{ in, want string }{
		{"prod", "prod"},
		{"openai-east_1.v2", "openai-east_1.v2"},
		{`a"b\c`, `a"b\c`},
		{"a b", "a b"},
		{"", "unknown"},
		{"   ", "unknown"},
		{"\t", "_"},
		{"é", "_"},
		{"日本", "__"},
		{"a\xffb", "a_b"},
		{"a\x7fb", "a_b"},
		{long, long[:1024]},
		{"é" + long, "_" + long[:1023]},
		{strings.Repeat(" ", 1025), "unknown"},
	} {
		got := dimensionValue(tt.in)
		if got != tt.want {
			t.Errorf("dimensionValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if err := validDimensionValue(got); err != nil {
			t.Errorf("dimensionValue(%q) = %q: %v", tt.in, got, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { dimensionValue("openai") }); n != 0 {
		t.Errorf("dimensionValue of a valid value allocates %v times, want 0", n)
	}
}

func TestAppendNumber(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 1.5, 0.1, 1e-7, 1e-9, 123456.789, 1e15, 1e20, 1e21, 1e300, 9.223372036854776e12} {
		got := appendNumber(nil, f)
		var back float64
		if err := json.Unmarshal(got, &back); err != nil || back != f {
			t.Errorf("appendNumber(%v) = %s, reads back as %v (%v)", f, got, back, err)
		}
	}
	// A cost is written as an answer's usage.cost writes it.
	for f, want := range map[float64]string{1e-9: "0.000000001", 5e-7: "0.0000005", 0.000014: "0.000014", -2.5e-6: "-0.0000025"} {
		if got := appendNumber(nil, f); string(got) != want {
			t.Errorf("appendNumber(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestRecordAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	e := NewEMF(discard{}, "prod")
	r := Request{Status: 200, Provider: "p2", RouteDepth: 2, FailedProviders: []string{"p0", "p1", "p0"},
		Latency: time.Second, TimeToFirstToken: time.Millisecond, Cost: 0.01}
	e.Record(r)
	if n := testing.AllocsPerRun(1000, func() { e.Record(r) }); n > 0 {
		t.Errorf("Record allocates %v times, want 0", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func BenchmarkRecord(b *testing.B) {
	for _, bb := range []struct {
		name string
		req  Request
	}{
		{"answer", Request{Status: 200, Provider: "openai", Latency: 850 * time.Millisecond,
			TimeToFirstToken: 120 * time.Millisecond, Cost: 0.00042}},
		{"fallback", Request{Status: 200, Provider: "p2", RouteDepth: 2, FailedProviders: []string{"p0", "p1", "p0"},
			Latency: 3 * time.Second, TimeToFirstToken: 2500 * time.Millisecond, Cost: 0.01}},
		{"replay", Request{Status: 200, Replayed: true, Latency: 3 * time.Millisecond}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			e := NewEMF(discard{}, "prod")
			b.ReportAllocs()
			for b.Loop() {
				e.Record(bb.req)
			}
		})
	}
	b.Run("answer/parallel", func(b *testing.B) {
		e := NewEMF(discard{}, "prod")
		r := Request{Status: 200, Provider: "openai", Latency: 850 * time.Millisecond,
			TimeToFirstToken: 120 * time.Millisecond, Cost: 0.00042}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e.Record(r)
			}
		})
	})
}

// TestCount: a count of its own is one line on the Stage dimension.
func TestCount(t *testing.T) {
	var b bytes.Buffer
	e := NewEMF(&b, "prod")
	e.now = func() time.Time { return time.UnixMilli(1700000000000) }
	e.Count(MetricSecretRefreshFailures, 1)
	want := `{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"Buzzgate","Dimensions":[["Stage"]],"Metrics":[{"Name":"SecretRefreshFailures","Unit":"Count"}]}]},"Stage":"prod","SecretRefreshFailures":1}` + "\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
