package templatetest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The code a function runs, by the package its Makefile target builds.
const (
	kindAPI   = "api"   // ./functions/api: the gateway
	kindSweep = "sweep" // ./functions/sweep: the scheduled billing sweep
)

const (
	ledgerDir = "../../pkg/billing/dynamoledger"
	sweepDir  = "../../functions/sweep"
)

// buildPackage matches the package a build-<Id> recipe line builds.
var buildPackage = regexp.MustCompile(`\./functions/(\w+)`)

// functionKind reads which ./functions/<kind> the Makefile's build-<id>
// target builds; the checks that differ between the gateway and the sweep
// go by it.
func functionKind(t *testing.T, id string) string {
	t.Helper()
	makefile, err := os.ReadFile(makefilePath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(makefile), "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "build-"+id+":") {
			continue
		}
		for _, recipe := range lines[i+1:] {
			if !strings.HasPrefix(recipe, "\t") {
				break
			}
			if m := buildPackage.FindStringSubmatch(recipe); m != nil {
				switch m[1] {
				case kindAPI, kindSweep:
					return m[1]
				}
				t.Errorf("%s: build-%s builds ./functions/%s, which these tests do not know", id, id, m[1])
				return m[1]
			}
		}
	}
	t.Errorf("%s: the Makefile's build-%s target builds no ./functions/<name>", id, id)
	return ""
}

// reconcileActions are the DynamoDB calls reachable from dynamoledger's
// Reconcile (and so the sweep's only actions on the table), read from the
// code: every function or method whose name Reconcile's body mentions,
// transitively, and in them every s.client.X call. Going by names
// over-approximates (two methods of one name are both followed), never
// under-approximates.
var reconcileActions = func(t *testing.T) []string {
	t.Helper()
	actions, err := loadReconcileActions()
	if err != nil {
		t.Fatal(err)
	}
	return actions
}

var loadReconcileActions = sync.OnceValues(func() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(ledgerDir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	bodies := map[string][]*ast.BlockStmt{} // function or method name -> bodies
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				bodies[fn.Name.Name] = append(bodies[fn.Name.Name], fn.Body)
			}
		}
	}
	if bodies["Reconcile"] == nil {
		return nil, fmt.Errorf("%s has no Reconcile: the sweep (functions/sweep) calls billing.Reconciler's", ledgerDir)
	}
	calls := map[string]bool{}
	seen := map[string]bool{"Reconcile": true}
	queue := []string{"Reconcile"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		for _, body := range bodies[name] {
			ast.Inspect(body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if method, ok := n.Fun.(*ast.SelectorExpr); ok {
						if field, ok := method.X.(*ast.SelectorExpr); ok && field.Sel.Name == "client" {
							calls["dynamodb:"+method.Sel.Name] = true
						}
					}
				case *ast.Ident:
					if bodies[n.Name] != nil && !seen[n.Name] {
						seen[n.Name] = true
						queue = append(queue, n.Name)
					}
				}
				return true
			})
		}
	}
	var out []string
	for c := range calls {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
})

// sweepMetricNames are the metrics functions/sweep declares (its string
// constants named metricSweep*).
func sweepMetricNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sweepDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gen, ok := d.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "metricSweep") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						names = append(names, v)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s declares no metricSweep* constants", sweepDir)
	}
	sort.Strings(names)
	return names
}

// scheduleRate matches rate(N minute[s]) / rate(N hour[s]).
var scheduleRate = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours)\)$`)

func TestSweepFunction(t *testing.T) {
	tpl := load(t)
	var sweeps []string
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		if functionKind(t, id) == kindSweep {
			sweeps = append(sweeps, id)
		}
	}
	if len(sweeps) != 1 {
		t.Fatalf("want one function built from ./functions/sweep, got %v", sweeps)
	}
	id := sweeps[0]
	fn := tpl.cf.GetAllServerlessFunctionResources()[id]

	// One schedule, enabled, at most every 15 minutes: holds of dead
	// requests must not wait long for their bill.
	var period int
	for name, ev := range fn.Events {
		if ev.Type != "Schedule" {
			t.Errorf("%s: event %s is %s: the sweep is invoked by its schedule only", id, name, ev.Type)
			continue
		}
		if period != 0 {
			t.Errorf("%s: more than one schedule", id)
		}
		sched := ev.Properties.ScheduleEvent
		if sched == nil {
			t.Errorf("%s: event %s has no Schedule properties", id, name)
			continue
		}
		if sched.Enabled != nil && !*sched.Enabled {
			t.Errorf("%s: event %s is disabled", id, name)
		}
		m := scheduleRate.FindStringSubmatch(sched.Schedule)
		if m == nil {
			t.Errorf("%s: Schedule = %q, want rate(N minutes)", id, sched.Schedule)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		period = n * 60
		if strings.HasPrefix(m[2], "hour") {
			period *= 60
		}
		if period < 60 || period > 15*60 {
			t.Errorf("%s: Schedule = %q, want every 1 to 15 minutes", id, sched.Schedule)
		}
	}
	if period == 0 {
		t.Fatalf("%s: no Schedule event", id)
	}
	// A run ends before the next one starts (an overlap would be safe, but
	// a run that needs longer than the period is a sign of trouble).
	if fn.Timeout == nil || *fn.Timeout >= period {
		t.Errorf("%s: Timeout = %v, want below the schedule's %d s", id, derefInt(fn.Timeout), period)
	}
	// The next scheduled run is the retry.
	if c := fn.EventInvokeConfig; c == nil || c.MaximumRetryAttempts == nil || *c.MaximumRetryAttempts != 0 {
		t.Errorf("%s: want EventInvokeConfig.MaximumRetryAttempts 0 (the next run retries)", id)
	}

	// Its role may run Reconcile and nothing else: that Reconcile exists
	// and its calls match the policy is TestDynamoDBPolicyIsLeastPrivilege's.
	if got := reconcileActions(t); len(got) == 0 {
		t.Errorf("Reconcile makes no DynamoDB call?")
	}

	// Alarms: on its errors, and on its not running.
	var errorsAlarm, notRunning bool
	for _, a := range tpl.resources("AWS::CloudWatch::Alarm") {
		p := tpl.props(a)
		if p["Namespace"] != "AWS/Lambda" {
			continue
		}
		ours := false
		for _, d := range list(p["Dimensions"]) {
			if get(d, "Name") == "FunctionName" && isRef(get(d, "Value"), id) {
				ours = true
			}
		}
		if !ours {
			continue
		}
		switch p["MetricName"] {
		case "Errors":
			errorsAlarm = true
			if p["Statistic"] != "Sum" || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || fmt.Sprint(p["Threshold"]) != "1" || p["TreatMissingData"] != "notBreaching" {
				t.Errorf("%s: want Sum >= 1, missing data not breaching", a)
			}
		case "Invocations":
			notRunning = true
			if p["ComparisonOperator"] != "LessThanThreshold" || p["TreatMissingData"] != "breaching" {
				t.Errorf("%s: want Invocations < threshold with missing data breaching (no run at all)", a)
			}
			if per, _ := strconv.Atoi(fmt.Sprint(p["Period"])); per < 2*period {
				t.Errorf("%s: Period = %v, want at least two schedule periods (%d s)", a, p["Period"], 2*period)
			}
		}
	}
	if !errorsAlarm {
		t.Errorf("no alarm on AWS/Lambda Errors of %s", id)
	}
	if !notRunning {
		t.Errorf("no alarm on %s not running (AWS/Lambda Invocations)", id)
	}

	// The dashboard shows its runs (the metric names are checked by
	// TestDashboardShowsEveryMetric).
	body, _ := subText(tpl.props(tpl.one(t, "AWS::CloudWatch::Dashboard"))["DashboardBody"])
	if !strings.Contains(body, `"FunctionName", "${`+id+`}"`) {
		t.Errorf("the dashboard does not show %s's Lambda metrics", id)
	}
}

// TestFunctionsHaveLogGroups wants a log group with the retention parameter
// for every function (Lambda's own would keep its logs, and the EMF
// metrics in them, forever).
func TestFunctionsHaveLogGroups(t *testing.T) {
	tpl := load(t)
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		found := false
		for _, lg := range tpl.resources("AWS::Logs::LogGroup") {
			p := tpl.props(lg)
			if name, _ := subText(p["LogGroupName"]); name != "/aws/lambda/${"+id+"}" {
				continue
			}
			found = true
			if !isRef(p["RetentionInDays"], "LogRetentionDays") {
				t.Errorf("%s: RetentionInDays = %v, want !Ref LogRetentionDays", lg, p["RetentionInDays"])
			}
		}
		if !found {
			t.Errorf("%s: no AWS::Logs::LogGroup named /aws/lambda/${%s}", id, id)
		}
	}
}

// TestSweepMetricsAreKnown keeps the sweep's metric names apart from the
// gateway's (one namespace, one dimension).
func TestSweepMetricsAreKnown(t *testing.T) {
	for _, name := range sweepMetricNames(t) {
		if slices.Contains(metricNames, name) {
			t.Errorf("sweep metric %s is also a gateway metric", name)
		}
	}
}
