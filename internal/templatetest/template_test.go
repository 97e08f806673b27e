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

	"github.com/buzzgate/buzzgate/internal/samtemplate"
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
	"PairRequests", "DroppedFields", "ProjectRequests", "ProjectCost", "BudgetRefusals", "BalanceRefusals", "RateLimited",
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
			if secretVarName.MatchString(name) && v != "" {
				// Declared empty at most (for SAM CLI's --env-vars); in AWS
				// the value comes from the secret at run time.
				t.Errorf("%s: %s = %v: a secret's variable must be empty in the template", id, name, v)
			}
			if text, _ := subText(v); strings.Contains(text, "{{resolve:") || strings.Contains(fmt.Sprint(v), "{{resolve:") {
				// A resolved secret is readable by whoever may read the
				// function's configuration: the gateway reads it at run
				// time instead (BUZZGATE_SECRET_ID).
				t.Errorf("%s: %s resolves a secret into the environment", id, name)
			}
		}
		if kind == kindAPI && !isRef(vars["BUZZGATE_SECRET_ID"], "ProviderSecretName") {
			t.Errorf("%s: BUZZGATE_SECRET_ID = %v, want !Ref ProviderSecretName", id, vars["BUZZGATE_SECRET_ID"])
		}
		if _, ok := vars["BUZZGATE_SECRET_ID"]; ok && kind == kindSweep {
			// Reconcile calls no provider and hashes no API key.
			t.Errorf("%s: the sweep needs no secret", id)
		}
		// No provider's key has a variable of its own: each comes from the
		// secret, so a new provider needs no template edit.
		for i, p := range cfg.Providers {
			if _, ok := vars[p.APIKeyEnv]; ok && p.APIKeyEnv != "" {
				t.Errorf("%s: deploy/config.yaml providers[%d] (%s): %s is in the function's environment; it belongs in the secret", id, i, p.Name, p.APIKeyEnv)
			}
		}
	}
}

// TestSecretPolicyIsLeastPrivilege: the API function may read the one
// provider secret and do nothing else with Secrets Manager; the sweep
// nothing at all.
func TestSecretPolicyIsLeastPrivilege(t *testing.T) {
	tpl := load(t)
	found := 0
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		for i, policy := range list(get(tpl.props(id), "Policies")) {
			doc, _ := policy.(map[string]any)
			for j, stmt := range list(doc["Statement"]) {
				s, _ := stmt.(map[string]any)
				actions, _ := stringList(s["Action"])
				if !strings.Contains(strings.ToLower(strings.Join(actions, " ")), "secretsmanager:") {
					continue
				}
				at := fmt.Sprintf("%s: Policies[%d].Statement[%d]", id, i, j)
				text, _ := subText(s["Resource"])
				if functionKind(t, id) != kindAPI || len(actions) != 1 || actions[0] != "secretsmanager:GetSecretValue" || s["Effect"] != "Allow" ||
					text != "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${ProviderSecretName}-??????" {
					t.Errorf("%s: %v, want the API function's GetSecretValue on the provider secret only", at, s)
					continue
				}
				found++
			}
		}
	}
	if found != 1 {
		t.Errorf("%d statements read the provider secret, want 1", found)
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

// TestAPIStreamsFromLambda: one REST API, declared as SAM resources, whose
// one route (every method under /api/v1) streams the gateway function's
// answer. What SAM's translator (1.109 or later) makes of it, in
// samtranslator/model/eventsources/push.py and swagger/swagger.py: an
// Api event with ResponseTransferMode RESPONSE_STREAM gets an AWS_PROXY
// integration (POST) on
// arn:${Partition}:apigateway:${Region}:lambda:path/2021-11-15/functions/<arn>/response-streaming-invocations
// with responseTransferMode STREAM and the event's timeoutInMillis, plus
// an AWS::Lambda::Permission for API Gateway on this API; the
// AWS::Serverless::Api gets a Deployment whose logical id hashes the
// definition (a new one whenever the API changes) and the stage.
func TestAPIStreamsFromLambda(t *testing.T) {
	tpl := load(t)
	api := tpl.one(t, "AWS::Serverless::Api")
	for _, typ := range []string{"AWS::Serverless::HttpApi", "AWS::ApiGatewayV2::Api"} {
		if ids := tpl.resources(typ); len(ids) > 0 {
			t.Errorf("%s %v: the API is one REST API with streaming integrations (HTTP APIs buffer and stop at 30 s)", typ, ids)
		}
	}
	// SAM generates these from the Api and the event. Written by hand they
	// are invisible to `sam local start-api`, and a hand-made Deployment is
	// not redeployed when the API changes.
	for _, typ := range []string{"AWS::ApiGateway::RestApi", "AWS::ApiGateway::Resource", "AWS::ApiGateway::Method", "AWS::ApiGateway::Deployment", "AWS::ApiGateway::Stage", "AWS::ApiGateway::GatewayResponse", "AWS::Lambda::Permission"} {
		if ids := tpl.resources(typ); len(ids) > 0 {
			t.Errorf("%s %v: declare the API with %s and the function's Api event (SAM generates this)", typ, ids, api)
		}
	}

	p := tpl.props(api)
	if typ := get(p, "EndpointConfiguration", "Type"); typ != "REGIONAL" && get(p, "EndpointConfiguration") != "REGIONAL" {
		t.Errorf("%s: EndpointConfiguration.Type = %v, want REGIONAL (a stream's idle timeout is 5 min there, 30 s on an edge-optimized endpoint)", api, typ)
	}
	if !isRef(p["StageName"], "Stage") {
		t.Errorf("%s: StageName = %v, want !Ref Stage", api, p["StageName"])
	}
	if v, _ := p["OpenApiVersion"].(string); !regexp.MustCompile(`^2\.0$`).MatchString(v) {
		t.Errorf("%s: OpenApiVersion = %v, want \"2.0\" (without it SAM adds a second stage named Stage)", api, p["OpenApiVersion"])
	}
	if p["DefinitionBody"] != nil || p["DefinitionUri"] != nil {
		t.Errorf("%s: a definition of its own: the route comes from the function's event, which SAM CLI reads", api)
	}
	settings := list(p["MethodSettings"])
	if len(settings) != 1 || get(settings[0], "ResourcePath") != "/*" || get(settings[0], "HttpMethod") != "*" ||
		!isRef(get(settings[0], "ThrottlingRateLimit"), "ThrottlingRateLimit") || !isRef(get(settings[0], "ThrottlingBurstLimit"), "ThrottlingBurstLimit") {
		t.Errorf("%s: MethodSettings = %v, want one for /* and * with the throttling parameters", api, p["MethodSettings"])
	}
	checkGatewayResponses(t, api, p["GatewayResponses"])

	// The gateway function's event: every path under /api/v1, every method,
	// streamed, with the longest timeout a stream allows.
	var streamed []string
	for _, fn := range tpl.resources("AWS::Serverless::Function") {
		events, _ := get(tpl.props(fn), "Events").(map[string]any)
		for name, ev := range events {
			if typ := get(ev, "Type"); typ != "Api" {
				if typ == "HttpApi" {
					t.Errorf("%s: event %s is an HttpApi", fn, name)
				}
				continue
			}
			at := fn + ".Events." + name
			if functionKind(t, fn) != kindAPI {
				t.Errorf("%s: only the gateway function serves the API", at)
				continue
			}
			streamed = append(streamed, fn)
			ep, _ := get(ev, "Properties").(map[string]any)
			if !isRef(ep["RestApiId"], api) {
				t.Errorf("%s: RestApiId = %v, want !Ref %s", at, ep["RestApiId"], api)
			}
			if ep["Path"] != "/api/v1/{proxy+}" || !strings.EqualFold(fmt.Sprint(ep["Method"]), "ANY") {
				t.Errorf("%s: %v %v, want ANY /api/v1/{proxy+}", at, ep["Method"], ep["Path"])
			}
			if ep["ResponseTransferMode"] != "RESPONSE_STREAM" {
				t.Errorf("%s: ResponseTransferMode = %v, want RESPONSE_STREAM", at, ep["ResponseTransferMode"])
			}
			if ms, ok := ep["TimeoutInMillis"].(int); !ok || ms < 600_000 || ms > 900_000 {
				t.Errorf("%s: TimeoutInMillis = %v, want 600000 to 900000 (the request ceiling is 600 s; STREAM allows 15 min)", at, ep["TimeoutInMillis"])
			}
			if ep["Auth"] != nil {
				t.Errorf("%s: Auth = %v: the gateway authenticates the bearer key itself", at, ep["Auth"])
			}
		}
	}
	if len(streamed) != 1 {
		t.Errorf("the gateway function has %d Api events, want 1", len(streamed))
	}
}

// errorEnvelope: an API Gateway response template that renders as the
// gateway's OpenAI error envelope ($context.error.messageString is a JSON
// string in quotes).
func errorEnvelope(t *testing.T, at string, tmpl any, code, typ string) {
	t.Helper()
	s, _ := tmpl.(string)
	s = strings.ReplaceAll(s, "$context.error.messageString", `"Missing Authentication Token"`)
	var env struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(s), &env); err != nil || env.Error == nil {
		t.Errorf("%s: template %q is not a JSON error envelope: %v", at, tmpl, err)
		return
	}
	if _, ok := env.Error["param"]; !ok || env.Error["message"] == nil || env.Error["code"] != code || env.Error["type"] != typ {
		t.Errorf("%s: %v, want code %q and type %q with message and param", at, env.Error, code, typ)
	}
}

// checkGatewayResponses: the errors API Gateway answers itself come in the
// gateway's error envelope with an x-request-id, so clients parse them
// like the gateway's own.
func checkGatewayResponses(t *testing.T, api string, v any) {
	t.Helper()
	responses, _ := v.(map[string]any)
	want := []struct {
		typ, status, code, errType string
		headers                    map[string]string
	}{
		{"MISSING_AUTHENTICATION_TOKEN", "404", "not_found", "not_found_error", nil},
		{"THROTTLED", "429", "capacity", "rate_limit_error", map[string]string{"x-gateway-admission-refused": "'true'", "retry-after": "'1'"}},
		{"REQUEST_TOO_LARGE", "413", "request_too_large", "invalid_request_error", nil},
		{"INTEGRATION_TIMEOUT", "504", "request_timeout", "timeout_error", nil},
		{"DEFAULT_4XX", "", "invalid_request", "invalid_request_error", nil},
		{"DEFAULT_5XX", "", "internal_error", "server_error", nil},
	}
	for _, w := range want {
		at := api + ".GatewayResponses." + w.typ
		r, ok := responses[w.typ].(map[string]any)
		if !ok {
			t.Errorf("%s: missing", at)
			continue
		}
		for k := range r {
			if k != "StatusCode" && k != "ResponseParameters" && k != "ResponseTemplates" {
				t.Errorf("%s: %s is not a property SAM knows", at, k)
			}
		}
		if got := fmt.Sprint(r["StatusCode"]); w.status != "" && got != w.status {
			t.Errorf("%s: StatusCode = %v, want %q", at, r["StatusCode"], w.status)
		}
		for k := range get(r, "ResponseParameters").(map[string]any) {
			if k != "Headers" {
				t.Errorf("%s: ResponseParameters.%s: only Headers here", at, k)
			}
		}
		headers, _ := get(r, "ResponseParameters", "Headers").(map[string]any)
		if headers["x-request-id"] != "context.requestId" {
			t.Errorf("%s: x-request-id = %v, want context.requestId", at, headers["x-request-id"])
		}
		for k, v := range w.headers {
			if headers[k] != v {
				t.Errorf("%s: %s = %v, want %s", at, k, headers[k], v)
			}
		}
		errorEnvelope(t, at, get(r, "ResponseTemplates", "application/json"), w.code, w.errType)
	}
}

// TestSAMLocalFindsRoutes applies SAM CLI's route discovery
// (internal/samtemplate): `sam local start-api` serves the gateway's route
// from the function's event. The template before this layout had none
// (internal/samtemplate's TestRoutesOfPlainMethods).
func TestSAMLocalFindsRoutes(t *testing.T) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	raw := load(t)
	api := raw.one(t, "AWS::Serverless::Api")
	routes, provider := samtemplate.LocalRoutes(tpl)
	if provider != "sam" || len(routes) != 1 {
		t.Fatalf("SAM CLI would pick its %s provider and find %d routes (%+v), want the SAM provider and 1 route", provider, len(routes), routes)
	}
	r := routes[0]
	if r.Path != "/api/v1/{proxy+}" || r.Method != "ANY" || r.API != api || r.Event != "Api" || functionKind(t, r.Function) != kindAPI {
		t.Errorf("route %+v, want ANY /api/v1/{proxy+} of %s (a REST API) to the gateway function", r, api)
	}
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
	api := tpl.one(t, "AWS::Serverless::Api")
	url, _ := subText(get(outputs, "ApiUrl", "Value"))
	if want := "https://${" + api + "}.execute-api.${AWS::Region}.${AWS::URLSuffix}/${" + api + ".Stage}/api/v1"; url != want {
		t.Errorf("ApiUrl = %q, want %q", url, want)
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
