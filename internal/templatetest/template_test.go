package templatetest

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/ddbtable"
)

// storeActions are the DynamoDB calls dynamostore.Store makes, and so the
// only actions the function's role may have on the table:
//
//	PutItem     Reserve, Append, the parts of a large answer
//	Query       Load (and Append/Complete of a record this instance did not reserve)
//	UpdateItem  Heartbeat, Complete, Tombstone
//	DeleteItem  Release
//
// EnsureTable's CreateTable, DescribeTable and UpdateTimeToLive are left out
// on purpose: under Lambda the gateway does not create the table, the
// template does. TestStoreCallsMatchPolicy fails when the store starts
// calling something else, so that this list (and the template) follow.
var storeActions = []string{"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}

// metricNames are the metrics the gateway emits (Embedded Metric Format,
// namespace Buzzgate, dimension Stage; ProviderErrors also by Provider).
var metricNames = []string{
	"Requests", "Replays", "IdempotencyConflicts", "ReplayUnavailable",
	"IdempotencyInProgress", "IdempotencyStoreErrors", "Fallbacks", "RouteDepth",
	"ProviderErrors", "Latency", "TimeToFirstToken", "Cost", "Errors5xx",
}

const metricNamespace = "Buzzgate"

func TestTemplateIsSAM(t *testing.T) {
	tpl := load(t)
	if got := tpl.raw["Transform"]; got != "AWS::Serverless-2016-10-31" {
		t.Errorf("Transform = %v, want AWS::Serverless-2016-10-31", got)
	}
	// goformation does not apply Globals, so these tests would check a
	// function without what Globals adds: keep every property on the
	// function itself.
	if g := get(tpl.raw, "Globals"); g != nil {
		t.Errorf("the template has Globals: put those properties on the resources (the checks here read the resources only)")
	}
}

func TestFunctionsBuildWithMakefile(t *testing.T) {
	tpl := load(t)
	makefile, err := os.ReadFile(makefilePath)
	if err != nil {
		t.Fatal(err)
	}
	fns := tpl.cf.GetAllServerlessFunctionResources()
	if len(fns) == 0 {
		t.Fatal("no AWS::Serverless::Function in the template")
	}
	for id, fn := range fns {
		if got := fn.AWSCloudFormationMetadata["BuildMethod"]; got != "makefile" {
			t.Errorf("%s: Metadata.BuildMethod = %v, want makefile", id, got)
		}
		target := regexp.MustCompile(`(?m)^build-` + regexp.QuoteMeta(id) + `:`)
		if !target.Match(makefile) {
			t.Errorf("%s: the Makefile has no build-%s target (SAM's makefile build calls it)", id, id)
		}
		if fn.CodeUri == nil || fn.CodeUri.String == nil || *fn.CodeUri.String != "." {
			t.Errorf("%s: CodeUri must be \".\" (the module root, where the Makefile is)", id)
		}
		if got := deref(fn.Runtime); got != "provided.al2023" {
			t.Errorf("%s: Runtime = %q, want provided.al2023", id, got)
		}
		if diff := cmp.Diff([]string{"arm64"}, fn.Architectures); diff != "" {
			t.Errorf("%s: Architectures (-want +got):\n%s", id, diff)
		}
		if got := deref(fn.Handler); got != "bootstrap" {
			t.Errorf("%s: Handler = %q, want bootstrap", id, got)
		}
		switch functionKind(t, id) {
		case kindAPI:
			// The gateway's request ceiling is 600 s; Lambda's maximum is 900 s.
			if fn.Timeout == nil || *fn.Timeout < 600 || *fn.Timeout > 900 {
				t.Errorf("%s: Timeout = %v, want between 600 and 900 seconds", id, derefInt(fn.Timeout))
			}
		case kindSweep:
			// TestSweepFunction checks it against the schedule.
			if fn.Timeout == nil || *fn.Timeout < 30 {
				t.Errorf("%s: Timeout = %v, want at least 30 seconds", id, derefInt(fn.Timeout))
			}
		}
		if fn.MemorySize == nil {
			t.Errorf("%s: no MemorySize (the 128 MB default is far too little CPU)", id)
		}
	}
}

// tableID returns the logical id of the idempotency table.
func tableID(t *testing.T, tpl *template) string {
	t.Helper()
	return tpl.one(t, "AWS::DynamoDB::Table")
}

func TestTableMatchesStore(t *testing.T) {
	tpl := load(t)
	id := tableID(t, tpl)
	table := tpl.cf.GetAllDynamoDBTableResources()[id]

	type keyElem struct{ Name, Type string }
	var keys []keyElem
	for _, k := range table.KeySchema {
		keys = append(keys, keyElem{k.AttributeName, k.KeyType})
	}
	wantKeys := []keyElem{{ddbtable.AttrPK, "HASH"}, {ddbtable.AttrSK, "RANGE"}}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Errorf("%s: KeySchema (-want +got):\n%s", id, diff)
	}
	attrs := map[string]string{}
	for _, a := range table.AttributeDefinitions {
		attrs[a.AttributeName] = a.AttributeType
	}
	wantAttrs := map[string]string{ddbtable.AttrPK: "S", ddbtable.AttrSK: "S"}
	if diff := cmp.Diff(wantAttrs, attrs); diff != "" {
		t.Errorf("%s: AttributeDefinitions (-want +got):\n%s", id, diff)
	}
	if len(table.GlobalSecondaryIndexes) > 0 || len(table.LocalSecondaryIndexes) > 0 {
		t.Errorf("%s: the store uses no index; an index also needs its ARN in the function's policy", id)
	}
	if ttl := table.TimeToLiveSpecification; ttl == nil || deref(ttl.AttributeName) != ddbtable.AttrTTL || !ttl.Enabled {
		t.Errorf("%s: TimeToLiveSpecification must be enabled on %q (ddbtable.AttrTTL)", id, ddbtable.AttrTTL)
	}
	if pitr := table.PointInTimeRecoverySpecification; pitr == nil || pitr.PointInTimeRecoveryEnabled == nil || !*pitr.PointInTimeRecoveryEnabled {
		t.Errorf("%s: PointInTimeRecoverySpecification must be enabled", id)
	}
	if got := deref(table.BillingMode); got != "PAY_PER_REQUEST" {
		t.Errorf("%s: BillingMode = %q, want PAY_PER_REQUEST", id, got)
	}
	if sse := table.SSESpecification; sse == nil || !sse.SSEEnabled {
		t.Errorf("%s: SSESpecification.SSEEnabled must be true", id)
	}
	if got := table.AWSCloudFormationDeletionPolicy; got != "Retain" {
		t.Errorf("%s: DeletionPolicy = %q, want Retain", id, got)
	}
	if got := table.AWSCloudFormationUpdateReplacePolicy; got != "Retain" {
		t.Errorf("%s: UpdateReplacePolicy = %q, want Retain", id, got)
	}
}

var (
	// An environment variable that holds a secret, by its name.
	secretVarName = regexp.MustCompile(`(_API_KEY|_KEY|_SECRET|_TOKEN|_PASSWORD)$`)
	// A value that looks like a key written in plain text.
	literalKey = regexp.MustCompile(`(?i)^(sk|rk|pk|key)[-_][A-Za-z0-9_-]{6,}$`)
)

func TestFunctionEnvironment(t *testing.T) {
	tpl := load(t)
	table := tableID(t, tpl)
	cfg, err := catalog.Load(configPath)
	if err != nil {
		t.Fatal(err)
	}
	if get(tpl.raw, "Parameters", "ProviderSecretName") == nil {
		t.Fatal("no ProviderSecretName parameter")
	}
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		vars, _ := get(tpl.props(id), "Environment", "Variables").(map[string]any)
		if vars == nil {
			t.Errorf("%s: no Environment.Variables", id)
			continue
		}
		kind := functionKind(t, id)
		if got := vars["BUZZGATE_TABLE"]; !isRef(got, table) {
			t.Errorf("%s: BUZZGATE_TABLE = %v, want !Ref %s", id, got, table)
		}
		if got, ok := vars["BUZZGATE_CREATE_TABLE"]; ok && got != "false" {
			t.Errorf("%s: BUZZGATE_CREATE_TABLE = %v: the role cannot create the table, the template does", id, got)
		}
		// The metrics' Stage dimension, which the dashboard and alarms use.
		if got := vars["BUZZGATE_STAGE"]; !isRef(got, "Stage") {
			t.Errorf("%s: BUZZGATE_STAGE = %v, want !Ref Stage", id, got)
		}
		if kind == kindAPI {
			if got := vars["BUZZGATE_STORE"]; got != "dynamodb" {
				t.Errorf("%s: BUZZGATE_STORE = %v, want dynamodb", id, got)
			}
			if got := vars["BUZZGATE_CONFIG"]; got != "/var/task/config.yaml" {
				t.Errorf("%s: BUZZGATE_CONFIG = %v, want /var/task/config.yaml (deploy/config.yaml in the artifact)", id, got)
			}
		}

		names := make([]string, 0, len(vars))
		for name := range vars {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			v := vars[name]
			if s, ok := v.(string); ok && literalKey.MatchString(s) {
				t.Errorf("%s: %s looks like a key in plain text", id, name)
			}
			if text, _ := subText(v); kind == kindSweep && strings.Contains(text, "{{resolve:") {
				// Reconcile calls no provider and hashes no API key.
				t.Errorf("%s: %s: the sweep needs no secret", id, name)
				continue
			}
			if !secretVarName.MatchString(name) {
				continue
			}
			if kind == kindSweep {
				// Reconcile calls no provider and hashes no API key.
				t.Errorf("%s: %s: the sweep needs no secret", id, name)
				continue
			}
			text, ok := subText(v)
			want := regexp.MustCompile(`^\{\{resolve:secretsmanager:\$\{ProviderSecretName\}:SecretString:` + regexp.QuoteMeta(name) + `\}\}$`)
			if !ok || !want.MatchString(text) {
				t.Errorf("%s: %s = %v, want !Sub \"{{resolve:secretsmanager:${ProviderSecretName}:SecretString:%s}}\" (never a key in plain text)", id, name, v, name)
			}
		}

		// Every key the config names must reach the gateway.
		for i, p := range cfg.Providers {
			if kind != kindAPI {
				break
			}
			if p.APIKeyEnv == "" {
				continue
			}
			if _, ok := vars[p.APIKeyEnv]; !ok {
				t.Errorf("%s: deploy/config.yaml providers[%d] (%s) reads its key from %s, which the function's environment does not set", id, i, p.Name, p.APIKeyEnv)
			}
		}
	}
}

// TestStoreCallsMatchPolicy reads dynamostore's code for the DynamoDB calls
// the Store makes (s.client.X), so that the policy cannot fall behind it.
func TestStoreCallsMatchPolicy(t *testing.T) {
	var files []string
	for _, dir := range storeDirs {
		f, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f...)
	}
	fset := token.NewFileSet()
	calls := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			method, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			// The Store's client field: s.client.PutItem(...).
			if field, ok := method.X.(*ast.SelectorExpr); ok && field.Sel.Name == "client" {
				calls["dynamodb:"+method.Sel.Name] = true
			}
			return true
		})
	}
	var got []string
	for c := range calls {
		got = append(got, c)
	}
	sort.Strings(got)
	if diff := cmp.Diff(storeActions, got); diff != "" {
		t.Errorf("dynamostore.Store's DynamoDB calls changed (-storeActions +code):\n%s\nupdate storeActions and the function's policy in template.yaml", diff)
	}
}

// TestDynamoDBPolicyIsLeastPrivilege wants each function's role to have
// exactly the DynamoDB calls its code makes on the table: the gateway
// storeActions, the sweep reconcileActions.
func TestDynamoDBPolicyIsLeastPrivilege(t *testing.T) {
	tpl := load(t)
	table := tableID(t, tpl)
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		var allowed []string
		switch functionKind(t, id) {
		case kindAPI:
			allowed = storeActions
		case kindSweep:
			allowed = reconcileActions(t)
		default:
			continue
		}
		if get(tpl.props(id), "Role") != nil {
			t.Errorf("%s: a Role of its own is not checked here: use Policies", id)
		}
		granted := map[string]bool{}
		for i, policy := range list(get(tpl.props(id), "Policies")) {
			at := fmt.Sprintf("%s: Policies[%d]", id, i)
			switch policy := policy.(type) {
			case string:
				// A managed policy: none may touch DynamoDB or everything.
				if strings.Contains(strings.ToLower(policy), "dynamodb") || strings.Contains(policy, "Administrator") || strings.Contains(policy, "PowerUser") {
					t.Errorf("%s: managed policy %q grants more than the table's calls", at, policy)
				}
			case map[string]any:
				stmts, isDoc := policy["Statement"]
				if !isDoc {
					// A SAM policy template (DynamoDBCrudPolicy, ...).
					for name := range policy {
						if strings.Contains(strings.ToLower(name), "dynamodb") {
							t.Errorf("%s: policy template %s grants more than the table's calls", at, name)
						}
					}
					continue
				}
				for j, stmt := range list(stmts) {
					checkStatement(t, fmt.Sprintf("%s.Statement[%d]", at, j), stmt, table, allowed, granted)
				}
			default:
				t.Errorf("%s: unexpected policy %v", at, policy)
			}
		}
		var got []string
		for a := range granted {
			got = append(got, a)
		}
		sort.Strings(got)
		if diff := cmp.Diff(allowed, got); diff != "" {
			t.Errorf("%s: DynamoDB actions granted (-want +got):\n%s", id, diff)
		}
	}
}

// checkStatement fails a statement that grants DynamoDB more than allowed
// on the table, and records what it grants.
func checkStatement(t *testing.T, at string, stmt any, table string, allowed []string, granted map[string]bool) {
	t.Helper()
	s, ok := stmt.(map[string]any)
	if !ok {
		t.Errorf("%s: not a mapping", at)
		return
	}
	if _, ok := s["NotAction"]; ok {
		t.Errorf("%s: NotAction grants everything else", at)
	}
	if _, ok := s["NotResource"]; ok {
		t.Errorf("%s: NotResource grants everything else", at)
	}
	actions, ok := stringList(s["Action"])
	if !ok {
		t.Errorf("%s: Action must be a string or a list of strings", at)
		return
	}
	var dynamo []string
	for _, a := range actions {
		lower := strings.ToLower(a)
		switch {
		case a == "*" || strings.HasPrefix(lower, "dynamodb:") && strings.ContainsAny(a, "*?"):
			t.Errorf("%s: wildcard action %q", at, a)
		case strings.HasPrefix(lower, "dynamodb:"):
			dynamo = append(dynamo, a)
		}
	}
	if len(dynamo) == 0 {
		return
	}
	if s["Effect"] != "Allow" {
		return // a Deny narrows: fine
	}
	for _, a := range dynamo {
		if !slices.Contains(allowed, a) {
			t.Errorf("%s: %s is not a call the function's code makes (allowed: %v)", at, a, allowed)
			continue
		}
		granted[a] = true
	}
	for _, r := range list(s["Resource"]) {
		text, isSub := subText(r)
		switch {
		case isGetAtt(r, table, "Arn"):
		case isSub && text == "${"+table+".Arn}":
		default:
			t.Errorf("%s: Resource %v: DynamoDB actions may name only the table (!GetAtt %s.Arn)", at, r, table)
		}
	}
	if len(list(s["Resource"])) == 0 {
		t.Errorf("%s: no Resource", at)
	}
}

// The URI of a Lambda proxy integration through InvokeWithResponseStream.
var streamingURI = regexp.MustCompile(`^arn:(aws|\$\{AWS::Partition\}):apigateway:\$\{AWS::Region\}:lambda:path/2021-11-15/functions/\$\{(\w+)\.Arn\}/response-streaming-invocations$`)

func TestAPIStreamsFromLambda(t *testing.T) {
	tpl := load(t)
	api := tpl.one(t, "AWS::ApiGateway::RestApi")
	for _, typ := range []string{"AWS::Serverless::HttpApi", "AWS::ApiGatewayV2::Api", "AWS::Serverless::Api"} {
		if ids := tpl.resources(typ); len(ids) > 0 {
			t.Errorf("%s %v: the API is one REST API with streaming integrations (HTTP APIs buffer and stop at 30 s)", typ, ids)
		}
	}
	rest := tpl.cf.GetAllApiGatewayRestApiResources()[api]
	if rest.EndpointConfiguration == nil || !slices.Equal(rest.EndpointConfiguration.Types, []string{"REGIONAL"}) {
		t.Errorf("%s: EndpointConfiguration.Types must be [REGIONAL] (a stream's idle timeout is 5 min there, 30 s on an edge-optimized endpoint)", api)
	}

	methods := tpl.resources("AWS::ApiGateway::Method")
	if len(methods) == 0 {
		t.Fatal("no AWS::ApiGateway::Method")
	}
	invoked := map[string]bool{}
	typed := tpl.cf.GetAllApiGatewayMethodResources()
	for _, id := range methods {
		p := tpl.props(id)
		integ, _ := p["Integration"].(map[string]any)
		if integ == nil {
			t.Errorf("%s: no Integration", id)
			continue
		}
		if got := integ["Type"]; got != "AWS_PROXY" {
			t.Errorf("%s: Integration.Type = %v, want AWS_PROXY", id, got)
		}
		if got := integ["IntegrationHttpMethod"]; got != "POST" {
			t.Errorf("%s: Integration.IntegrationHttpMethod = %v, want POST (Lambda is invoked with POST)", id, got)
		}
		if got := integ["ResponseTransferMode"]; got != "STREAM" {
			t.Errorf("%s: Integration.ResponseTransferMode = %v, want STREAM", id, got)
		}
		uri, _ := subText(integ["Uri"])
		m := streamingURI.FindStringSubmatch(uri)
		switch {
		case m == nil:
			t.Errorf("%s: Integration.Uri = %v, want !Sub arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2021-11-15/functions/${<Function>.Arn}/response-streaming-invocations", id, integ["Uri"])
		case get(tpl.raw, "Resources", m[2], "Type") != "AWS::Serverless::Function":
			t.Errorf("%s: Integration.Uri invokes %s, which is not a function of this template", id, m[2])
		default:
			invoked[m[2]] = true
		}
		timeout := typed[id].Integration.TimeoutInMillis
		if timeout == nil || *timeout < 600_000 || *timeout > 900_000 {
			t.Errorf("%s: Integration.TimeoutInMillis = %v, want 600000 to 900000 (the request ceiling is 600 s; STREAM allows 15 min)", id, derefInt(timeout))
		}
		if !isRef(p["RestApiId"], api) {
			t.Errorf("%s: RestApiId = %v, want !Ref %s", id, p["RestApiId"], api)
		}
		if got := resourcePath(t, tpl, api, p["ResourceId"]); got != "/api/v1/{proxy+}" {
			t.Errorf("%s: path %q, want /api/v1/{proxy+}", id, got)
		}
	}

	// A deployment snapshots what exists when it is made: it must come after
	// every method and gateway response.
	deployment := tpl.one(t, "AWS::ApiGateway::Deployment")
	deps, _ := stringList(get(tpl.raw, "Resources", deployment, "DependsOn"))
	for _, id := range append(methods, tpl.resources("AWS::ApiGateway::GatewayResponse")...) {
		if !slices.Contains(deps, id) {
			t.Errorf("%s: DependsOn lacks %s, so the stage's snapshot may miss it", deployment, id)
		}
	}
	if stage := tpl.one(t, "AWS::ApiGateway::Stage"); !isRef(tpl.props(stage)["DeploymentId"], deployment) {
		t.Errorf("%s: DeploymentId = %v, want !Ref %s", stage, tpl.props(stage)["DeploymentId"], deployment)
	}

	// API Gateway may invoke each function it integrates, from this API.
	for fn := range invoked {
		found := false
		for _, id := range tpl.resources("AWS::Lambda::Permission") {
			p := tpl.props(id)
			if !isGetAtt(p["FunctionName"], fn, "Arn") && !isRef(p["FunctionName"], fn) {
				continue
			}
			found = true
			if p["Action"] != "lambda:InvokeFunction" || p["Principal"] != "apigateway.amazonaws.com" {
				t.Errorf("%s: want Action lambda:InvokeFunction (which InvokeWithResponseStream needs) for principal apigateway.amazonaws.com, got %v for %v", id, p["Action"], p["Principal"])
			}
			if src, _ := subText(p["SourceArn"]); !strings.Contains(src, ":execute-api:") || !strings.Contains(src, "${"+api+"}") {
				t.Errorf("%s: SourceArn = %v, want this API's execute-api ARN", id, p["SourceArn"])
			}
		}
		if !found {
			t.Errorf("no AWS::Lambda::Permission lets API Gateway invoke %s", fn)
		}
	}
}

// resourcePath follows an AWS::ApiGateway::Resource up to the API's root.
func resourcePath(t *testing.T, tpl *template, api string, ref any) string {
	t.Helper()
	var parts []string
	for range 16 {
		if isGetAtt(ref, api, "RootResourceId") {
			return "/" + strings.Join(parts, "/")
		}
		id, _ := get(ref, "Ref").(string)
		if get(tpl.raw, "Resources", id, "Type") != "AWS::ApiGateway::Resource" {
			t.Errorf("resource %v is not an AWS::ApiGateway::Resource of the template", ref)
			return ""
		}
		p := tpl.props(id)
		part, _ := p["PathPart"].(string)
		parts = append([]string{part}, parts...)
		ref = p["ParentId"]
	}
	t.Errorf("resource path too deep")
	return ""
}

// subVar matches ${Name}, ${Name.Attr} and the literal ${!Text} of Fn::Sub.
var subVar = regexp.MustCompile(`\$\{(!?)([^}]*)\}`)

// expandSub replaces every variable of a Fn::Sub template with a
// placeholder, after checking that it names a parameter, a resource (or its
// attribute) or a pseudo parameter of tpl.
func expandSub(t *testing.T, tpl *template, text string) string {
	t.Helper()
	return subVar.ReplaceAllStringFunc(text, func(v string) string {
		m := subVar.FindStringSubmatch(v)
		if m[1] == "!" {
			return "${" + m[2] + "}"
		}
		name, _, _ := strings.Cut(m[2], ".")
		switch {
		case strings.HasPrefix(name, "AWS::"):
		case get(tpl.raw, "Parameters", name) != nil:
		case get(tpl.raw, "Resources", name) != nil:
		default:
			t.Errorf("${%s} names no parameter or resource", m[2])
		}
		return "SUB_" + strings.NewReplacer(".", "_", ":", "_").Replace(m[2])
	})
}

func TestDashboardShowsEveryMetric(t *testing.T) {
	tpl := load(t)
	id := tpl.one(t, "AWS::CloudWatch::Dashboard")
	text, ok := subText(tpl.props(id)["DashboardBody"])
	if !ok {
		t.Fatalf("%s: DashboardBody must be a string or !Sub", id)
	}
	var body struct {
		Widgets []struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(expandSub(t, tpl, text)), &body); err != nil {
		t.Fatalf("%s: DashboardBody is not valid JSON: %v", id, err)
	}

	const stage = "SUB_Stage"
	shown := map[string]bool{}
	byProvider := false
	search := regexp.MustCompile(`SEARCH\('\{` + metricNamespace + `,([^}]*)\}[^']*MetricName="(\w+)"`)
	for i, w := range body.Widgets {
		if w.Type != "metric" {
			continue
		}
		for _, row := range list(w.Properties["metrics"]) {
			row, _ := row.([]any)
			if len(row) == 0 {
				continue
			}
			if expr, ok := get(row[0], "expression").(string); ok {
				if m := search.FindStringSubmatch(expr); m != nil {
					shown[m[2]] = true
					if m[2] == "ProviderErrors" && strings.Contains(m[1], "Provider") && strings.Contains(expr, `Stage="`+stage+`"`) {
						byProvider = true
					}
				}
				continue
			}
			ns, _ := row[0].(string)
			if ns != metricNamespace || len(row) < 2 {
				continue
			}
			name, _ := row[1].(string)
			shown[name] = true
			dims := map[string]any{}
			for j := 2; j+1 < len(row); j += 2 {
				k, ok := row[j].(string)
				if !ok {
					break
				}
				dims[k] = row[j+1]
			}
			if dims["Stage"] != stage {
				t.Errorf("widget %d: %s without the dimension Stage=${Stage}: every metric is emitted with it", i, name)
			}
		}
	}
	for _, name := range append(slices.Clone(metricNames), sweepMetricNames(t)...) {
		if !shown[name] {
			t.Errorf("%s: no widget shows %s.%s", id, metricNamespace, name)
		}
	}
	if !byProvider {
		t.Errorf("%s: no SEARCH over {%s,Stage,Provider} for ProviderErrors in this stage", id, metricNamespace)
	}
}

func TestAlarms(t *testing.T) {
	tpl := load(t)
	if p := get(tpl.raw, "Parameters", "AlarmTopicArn"); p == nil || get(p, "Default") != "" {
		t.Errorf(`want an AlarmTopicArn parameter with Default ""`)
	}
	if get(tpl.raw, "Parameters", "ProviderErrorRateThreshold") == nil {
		t.Errorf("want a ProviderErrorRateThreshold parameter")
	}
	stageDim := func(dims any) bool {
		for _, d := range list(dims) {
			if get(d, "Name") == "Stage" && isRef(get(d, "Value"), "Stage") {
				return true
			}
		}
		return false
	}

	var storeAlarm, rateAlarm string
	for _, id := range tpl.resources("AWS::CloudWatch::Alarm") {
		p := tpl.props(id)
		checkAlarmActions(t, tpl, id, p)
		if p["Namespace"] == metricNamespace && p["MetricName"] == "IdempotencyStoreErrors" {
			storeAlarm = id
			if p["Statistic"] != "Sum" || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || fmt.Sprint(p["Threshold"]) != "1" {
				t.Errorf("%s: want Sum >= 1, got %v %v %v", id, p["Statistic"], p["ComparisonOperator"], p["Threshold"])
			}
			if fmt.Sprint(p["Period"]) != "300" {
				t.Errorf("%s: Period = %v, want 300 (5 minutes)", id, p["Period"])
			}
			if !stageDim(p["Dimensions"]) {
				t.Errorf("%s: want the dimension Stage = !Ref Stage", id)
			}
		}
		ids := map[string]string{} // metric name -> query id
		var expr string
		for _, q := range list(p["Metrics"]) {
			if e, ok := get(q, "Expression").(string); ok {
				expr = e
				continue
			}
			if get(q, "MetricStat", "Metric", "Namespace") != metricNamespace {
				continue
			}
			name, _ := get(q, "MetricStat", "Metric", "MetricName").(string)
			qid, _ := get(q, "Id").(string)
			ids[name] = qid
			if !stageDim(get(q, "MetricStat", "Metric", "Dimensions")) {
				t.Errorf("%s: %s wants the dimension Stage = !Ref Stage (the Stage-only series)", id, name)
			}
			if fmt.Sprint(get(q, "MetricStat", "Period")) != "300" || get(q, "MetricStat", "Stat") != "Sum" {
				t.Errorf("%s: %s wants Sum over 300 s", id, name)
			}
		}
		if errs, reqs := ids["ProviderErrors"], ids["Requests"]; errs != "" && reqs != "" {
			rateAlarm = id
			if !strings.Contains(expr, "100 * "+errs+" / "+reqs) {
				t.Errorf("%s: Expression %q, want 100 * %s / %s", id, expr, errs, reqs)
			}
			if !isRef(p["Threshold"], "ProviderErrorRateThreshold") || p["ComparisonOperator"] != "GreaterThanThreshold" {
				t.Errorf("%s: want GreaterThanThreshold !Ref ProviderErrorRateThreshold", id)
			}
		}
	}
	if storeAlarm == "" {
		t.Error("no alarm on Buzzgate.IdempotencyStoreErrors")
	}
	if rateAlarm == "" {
		t.Error("no alarm on the provider error rate (ProviderErrors / Requests)")
	}
}

// checkAlarmActions wants an alarm's actions to notify AlarmTopicArn only
// when it is set.
func checkAlarmActions(t *testing.T, tpl *template, id string, p map[string]any) {
	t.Helper()
	for _, key := range []string{"AlarmActions", "OKActions"} {
		args, ok := get(p[key], "Fn::If").([]any)
		if !ok || len(args) != 3 {
			t.Errorf("%s: %s = %v, want !If [<condition on AlarmTopicArn>, [!Ref AlarmTopicArn], !Ref AWS::NoValue]", id, key, p[key])
			continue
		}
		cond, _ := args[0].(string)
		def, _ := json.Marshal(get(tpl.raw, "Conditions", cond))
		topics, _ := args[1].([]any)
		if !strings.Contains(string(def), `"AlarmTopicArn"`) || len(topics) != 1 || !isRef(topics[0], "AlarmTopicArn") || !isRef(args[2], "AWS::NoValue") {
			t.Errorf("%s: %s = %v, want !If [<condition on AlarmTopicArn>, [!Ref AlarmTopicArn], !Ref AWS::NoValue]", id, key, p[key])
		}
	}
}

func TestOutputs(t *testing.T) {
	tpl := load(t)
	outputs, _ := tpl.raw["Outputs"].(map[string]any)
	api := tpl.one(t, "AWS::ApiGateway::RestApi")
	url, _ := subText(get(outputs, "ApiUrl", "Value"))
	if !strings.HasPrefix(url, "https://${"+api+"}.execute-api.${AWS::Region}.") || !strings.HasSuffix(url, "/api/v1") {
		t.Errorf("ApiUrl = %q, want https://${%s}.execute-api.${AWS::Region}.amazonaws.com/<stage>/api/v1", url, api)
	}
	if v := get(outputs, "TableName", "Value"); !isRef(v, tableID(t, tpl)) {
		t.Errorf("TableName = %v, want !Ref of the table", v)
	}
	if v := get(outputs, "DashboardName", "Value"); !isRef(v, tpl.one(t, "AWS::CloudWatch::Dashboard")) {
		t.Errorf("DashboardName = %v, want !Ref of the dashboard", v)
	}
	var gateway []string
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		if functionKind(t, id) == kindAPI {
			gateway = append(gateway, id)
		}
	}
	if v := get(outputs, "FunctionArn", "Value"); len(gateway) != 1 || !isGetAtt(v, gateway[0], "Arn") {
		t.Errorf("FunctionArn = %v, want !GetAtt <the gateway function>.Arn", v)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}
