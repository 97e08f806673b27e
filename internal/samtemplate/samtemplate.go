// Package samtemplate reads template.yaml the way the tests need it, and
// reproduces what SAM CLI (v1.164) does with it locally, since SAM CLI and
// Docker are not available where the tests run:
//
//   - Decode turns the YAML into plain maps, lists and scalars with the
//     short-form intrinsics in their long form (!Ref X is {"Ref": "X"}),
//     and keeps the order of the resources (SAM CLI's choices depend on it).
//   - LocalRoutes finds the routes `sam local start-api` serves, by SAM
//     CLI's rules (samcli/lib/providers/api_provider.py, sam_api_provider.py,
//     cfn_api_provider.py): the first resource whose type is an
//     AWS::Serverless function or API decides that routes come from function
//     Events of type Api or HttpApi and from the DefinitionBody of
//     AWS::Serverless::Api and HttpApi resources only; a first
//     AWS::ApiGateway::* resource decides for CloudFormation's own
//     resources. No route means SAM CLI exits with "Template does not have
//     any APIs connected to Lambda functions".
//   - LocalEnv builds the environment SAM CLI gives a function in its
//     container (samcli/local/lambdafn/env_vars.py and
//     samcli/commands/local/lib/local_lambda.py): its AWS_* variables, then
//     every variable the template declares for the function, its intrinsics
//     resolved as SAM CLI's resolver does (a parameter's default, a
//     resource's logical id, a Sub with both; other intrinsics are left
//     unresolved and so empty, where SAM CLI makes up an ARN for a GetAtt),
//     overridden by the --env-vars file, which can only change variables
//     the template declares.
package samtemplate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Template is a decoded template.
type Template struct {
	// Raw is the whole template with intrinsics in their long form.
	Raw map[string]any
	// Order is the logical ids of the resources as the file lists them.
	Order []string
}

// Decode reads a CloudFormation/SAM template in YAML.
func Decode(data []byte) (*Template, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("want one YAML mapping")
	}
	v, err := Value(&root)
	if err != nil {
		return nil, err
	}
	tpl := &Template{Raw: v.(map[string]any)}
	doc := root.Content[0]
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "Resources" || doc.Content[i+1].Kind != yaml.MappingNode {
			continue
		}
		res := doc.Content[i+1]
		for j := 0; j+1 < len(res.Content); j += 2 {
			tpl.Order = append(tpl.Order, res.Content[j].Value)
		}
	}
	return tpl, nil
}

// shortForms maps CloudFormation's YAML short-form tags to their long form.
var shortForms = map[string]string{
	"!Ref": "Ref", "!Condition": "Condition",
	"!Base64": "Fn::Base64", "!Cidr": "Fn::Cidr", "!FindInMap": "Fn::FindInMap",
	"!GetAtt": "Fn::GetAtt", "!GetAZs": "Fn::GetAZs", "!ImportValue": "Fn::ImportValue",
	"!Join": "Fn::Join", "!Select": "Fn::Select", "!Split": "Fn::Split", "!Sub": "Fn::Sub",
	"!Transform": "Fn::Transform", "!And": "Fn::And", "!Equals": "Fn::Equals",
	"!If": "Fn::If", "!Not": "Fn::Not", "!Or": "Fn::Or",
}

// Value converts a YAML node into maps, lists and scalars, with short-form
// intrinsics in their long form.
func Value(n *yaml.Node) (any, error) {
	if long, ok := shortForms[n.Tag]; ok {
		inner := *n
		inner.Tag = ""
		if inner.Kind == yaml.ScalarNode {
			inner.Tag = "!!str"
		}
		v, err := Value(&inner)
		if err != nil {
			return nil, err
		}
		if s, ok := v.(string); ok && long == "Fn::GetAtt" {
			res, attr, _ := strings.Cut(s, ".")
			v = []any{res, attr}
		}
		return map[string]any{long: v}, nil
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return nil, fmt.Errorf("line %d: unknown tag %s", n.Line, n.Tag)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return Value(n.Content[0])
	case yaml.AliasNode:
		return Value(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := Value(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if _, dup := out[key]; dup {
				return nil, fmt.Errorf("line %d: key %q given twice", n.Content[i].Line, key)
			}
			v, err := Value(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[key] = v
		}
		return out, nil
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
}

// Get walks a decoded tree by map keys; nil when a key is missing.
func Get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// Route is one route `sam local start-api` serves.
type Route struct {
	Path   string
	Method string // as the template says it (ANY for every method)
	// Function is the logical id of the function that answers.
	Function string
	// API is the logical id of the API it belongs to (ServerlessRestApi for
	// SAM's implicit one), or "" for a CloudFormation method.
	API string
	// Event is "Api" (a REST API, payload format 1.0) or "HttpApi".
	Event string
}

// Resource types SAM CLI's providers look for.
const (
	serverlessFunction = "AWS::Serverless::Function"
	serverlessAPI      = "AWS::Serverless::Api"
	serverlessHTTPAPI  = "AWS::Serverless::HttpApi"
)

var cfnAPITypes = map[string]bool{
	"AWS::ApiGateway::RestApi": true, "AWS::ApiGateway::Stage": true,
	"AWS::ApiGateway::Resource": true, "AWS::ApiGateway::Method": true,
	"AWS::ApiGateway::Authorizer": true, "AWS::ApiGatewayV2::Authorizer": true,
	"AWS::ApiGatewayV2::Api": true, "AWS::ApiGatewayV2::Stage": true,
	"AWS::ApiGatewayV2::Integration": true, "AWS::ApiGatewayV2::Route": true,
}

// LocalRoutes returns the routes `sam local start-api` would serve, sorted
// by path and method, and which provider SAM CLI picked ("sam" or "cfn").
// Definition bodies in files (DefinitionUri, BodyS3Location) are not read.
func LocalRoutes(tpl *Template) (routes []Route, provider string) {
	provider = "sam"
	for _, id := range tpl.Order {
		typ, _ := Get(tpl.Raw, "Resources", id, "Type").(string)
		if typ == serverlessFunction || typ == serverlessAPI || typ == serverlessHTTPAPI {
			break
		}
		if cfnAPITypes[typ] {
			provider = "cfn"
			break
		}
	}
	for _, id := range tpl.Order {
		res := Get(tpl.Raw, "Resources", id)
		typ, _ := Get(res, "Type").(string)
		props, _ := Get(res, "Properties").(map[string]any)
		switch {
		case provider == "sam" && typ == serverlessFunction:
			routes = append(routes, eventRoutes(id, props)...)
		case provider == "sam" && (typ == serverlessAPI || typ == serverlessHTTPAPI):
			routes = append(routes, bodyRoutes(id, Get(props, "DefinitionBody"))...)
		case provider == "cfn" && typ == "AWS::ApiGateway::RestApi":
			routes = append(routes, bodyRoutes(id, Get(props, "Body"))...)
		case provider == "cfn" && typ == "AWS::ApiGateway::Method":
			if r, ok := methodRoute(tpl, props); ok {
				routes = append(routes, r)
			}
		}
	}
	sort.Slice(routes, func(i, j int) bool {
		if routes[i].Path != routes[j].Path {
			return routes[i].Path < routes[j].Path
		}
		return routes[i].Method < routes[j].Method
	})
	return routes, provider
}

// eventRoutes: a function's Events of type Api (owned by RestApiId, or the
// implicit ServerlessRestApi) or HttpApi (ApiId, or ServerlessHttpApi).
func eventRoutes(fn string, props map[string]any) []Route {
	events, _ := Get(props, "Events").(map[string]any)
	names := make([]string, 0, len(events))
	for name := range events {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []Route
	for _, name := range names {
		ev := events[name]
		typ, _ := Get(ev, "Type").(string)
		if typ != "Api" && typ != "HttpApi" {
			continue
		}
		p, _ := Get(ev, "Properties").(map[string]any)
		idKey, api := "RestApiId", "ServerlessRestApi"
		if typ == "HttpApi" {
			idKey, api = "ApiId", "ServerlessHttpApi"
		}
		switch v := p[idKey].(type) {
		case string:
			api = v
		case map[string]any:
			if ref, ok := v["Ref"].(string); ok {
				api = ref
			}
		}
		path, _ := p["Path"].(string)
		method, _ := p["Method"].(string)
		out = append(out, Route{Path: path, Method: method, Function: fn, API: api, Event: typ})
	}
	return out
}

// The function of a Lambda integration URI, as SAM CLI's LambdaUri finds it
// (samcli/commands/local/lib/swagger/integration_uri.py) in a template its
// intrinsic resolver has already resolved: ${Function.Arn} (or .Alias) and
// the pseudo parameters are substituted, then the first Lambda function
// ARN anywhere in the URI names the function (so a streaming integration's
// .../response-streaming-invocations is found too), else the generic
// /functions/NAME/invocations form.
var (
	subArn          = regexp.MustCompile(`\$\{([A-Za-z0-9]+)\.(?:Arn|Alias)\}`)
	functionArn     = regexp.MustCompile(`arn:aws:lambda:[^:]+:[^:]+:function:[^:/]+(?::[^/]+)?`)
	functionGeneric = regexp.MustCompile(`/functions/([^/]+)/invocations`)
	functionName    = regexp.MustCompile(`^.*:function:([^:]*)`)
	validName       = regexp.MustCompile(`^[a-zA-Z0-9-_]+`)
)

func uriFunction(uri any) (string, bool) {
	text, ok := uri.(string)
	if !ok {
		switch v := Get(uri, "Fn::Sub").(type) {
		case string:
			text, ok = v, true
		case []any:
			if len(v) > 0 {
				text, ok = v[0].(string)
			}
		}
		text = subArn.ReplaceAllString(text, "arn:aws:lambda:us-east-1:123456789012:function:$1")
		for name, value := range pseudo {
			text = strings.ReplaceAll(text, "${"+name+"}", value)
		}
	}
	if !ok {
		return "", false
	}
	arn := functionArn.FindString(text)
	if arn == "" {
		m := functionGeneric.FindStringSubmatch(text)
		if m == nil {
			return "", false
		}
		arn = m[1]
	}
	m := functionName.FindStringSubmatch(arn)
	if m == nil || strings.Contains(m[1], "${stageVariables.") || !validName.MatchString(m[1]) {
		return "", false
	}
	return m[1], true
}

// bodyRoutes: the paths of an inline OpenAPI/Swagger definition whose
// x-amazon-apigateway-integration is a Lambda function.
func bodyRoutes(api string, body any) []Route {
	paths, _ := Get(body, "paths").(map[string]any)
	var out []Route
	for path, item := range paths {
		methods, _ := item.(map[string]any)
		for method, op := range methods {
			// Only Lambda proxy integrations (SwaggerParser._get_integration).
			if typ, _ := Get(op, "x-amazon-apigateway-integration", "type").(string); !strings.EqualFold(typ, "aws_proxy") {
				continue
			}
			fn, ok := uriFunction(Get(op, "x-amazon-apigateway-integration", "uri"))
			if !ok {
				continue
			}
			if method == "x-amazon-apigateway-any-method" {
				method = "ANY"
			}
			out = append(out, Route{Path: path, Method: strings.ToUpper(method), Function: fn, API: api, Event: "Api"})
		}
	}
	return out
}

// methodRoute: an AWS::ApiGateway::Method, at the path of its resource
// chain; SAM CLI keeps it even when its integration names no function (its
// requests then fail), so Function may be "".
func methodRoute(tpl *Template, props map[string]any) (Route, bool) {
	fn, _ := uriFunction(Get(props, "Integration", "Uri"))
	var parts []string
	ref := props["ResourceId"]
	for range 32 {
		id, _ := Get(ref, "Ref").(string)
		if id == "" {
			break
		}
		part, _ := Get(tpl.Raw, "Resources", id, "Properties", "PathPart").(string)
		parts = append([]string{part}, parts...)
		ref = Get(tpl.Raw, "Resources", id, "Properties", "ParentId")
	}
	method, _ := props["HttpMethod"].(string)
	return Route{Path: "/" + strings.Join(parts, "/"), Method: method, Function: fn, Event: "Api"}, true
}

// Pseudo parameters as SAM CLI resolves them locally
// (IntrinsicsSymbolTable.DEFAULT_PSEUDO_PARAM_VALUES).
var pseudo = map[string]string{
	"AWS::AccountId": "123456789012", "AWS::Partition": "aws", "AWS::Region": "us-east-1",
	"AWS::StackName": "local", "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/local/51af3dc0-da77-11e4-872e-1234567db123",
	"AWS::URLSuffix": "localhost", "AWS::NoValue": "", "AWS::NotificationARNs": "",
}

// LocalEnv returns the environment SAM CLI gives function fn in its local
// container when run with `--env-vars file` (envVars is the file's
// content; nil for none), without the shell's variables and with SAM CLI's
// placeholder credentials (as when no AWS profile is configured).
func LocalEnv(tpl *Template, fn string, envVars []byte) (map[string]string, error) {
	res := Get(tpl.Raw, "Resources", fn)
	if Get(res, "Type") != serverlessFunction {
		return nil, fmt.Errorf("%s is not an %s of the template", fn, serverlessFunction)
	}
	props, _ := Get(res, "Properties").(map[string]any)
	env := map[string]string{
		"AWS_SAM_LOCAL":                   "true",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": scalar(props["MemorySize"]),
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     scalar(props["Timeout"]),
		"AWS_LAMBDA_FUNCTION_HANDLER":     scalar(props["Handler"]),
		"AWS_LAMBDA_FUNCTION_NAME":        fn,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "aws/lambda/" + fn,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "$LATEST",
		"AWS_REGION":                      "us-east-1",
		"AWS_DEFAULT_REGION":              "us-east-1",
		"AWS_ACCESS_KEY_ID":               "defaultkey",
		"AWS_SECRET_ACCESS_KEY":           "defaultsecret",
		"AWS_ACCOUNT_ID":                  "123456789012",
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
	}
	overrides := map[string]any{}
	if envVars != nil {
		var file map[string]map[string]any
		if err := json.Unmarshal(envVars, &file); err != nil {
			return nil, fmt.Errorf("--env-vars: want {\"<Function>\": {\"NAME\": \"value\"}, ...}: %w", err)
		}
		for k, v := range file["Parameters"] {
			overrides[k] = v
		}
		for k, v := range file[fn] {
			overrides[k] = v
		}
	}
	vars, _ := Get(props, "Environment", "Variables").(map[string]any)
	for name, v := range vars {
		value := resolve(tpl, v)
		if o, ok := overrides[name]; ok {
			value = o
		}
		env[name] = scalar(value)
	}
	return env, nil
}

// resolve evaluates Ref and Sub as SAM CLI does for local runs; what it
// cannot evaluate stays a map, which becomes "".
func resolve(tpl *Template, v any) any {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return v
	}
	if name, ok := m["Ref"].(string); ok {
		if s, ok := symbol(tpl, name); ok {
			return s
		}
		return v
	}
	text, ok := m["Fn::Sub"].(string)
	if !ok {
		return v
	}
	return subVar.ReplaceAllStringFunc(text, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		if s, ok := symbol(tpl, name); ok {
			return s
		}
		return ref
	})
}

var subVar = regexp.MustCompile(`\$\{[^}]*\}`)

// symbol: a pseudo parameter, a parameter's default, a resource's logical
// id (Ref of a resource), in SAM CLI's order.
func symbol(tpl *Template, name string) (string, bool) {
	if s, ok := pseudo[name]; ok {
		return s, true
	}
	if def := Get(tpl.Raw, "Parameters", name, "Default"); def != nil {
		return scalar(def), true
	}
	if Get(tpl.Raw, "Resources", name) != nil {
		return name, true
	}
	return "", false
}

// scalar stringifies a value as SAM CLI does (_stringify_value): true and
// false in lower case, maps and lists (unresolved intrinsics) empty.
func scalar(v any) string {
	switch v := v.(type) {
	case nil, map[string]any, []any:
		return ""
	case bool:
		return strconv.FormatBool(v)
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}
