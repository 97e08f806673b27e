package samtemplate

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func load(t *testing.T, path string) *Template {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestRoutesOfPlainMethods: a template that declares its API as
// AWS::ApiGateway::* resources after an AWS::Serverless::Function makes SAM
// CLI pick its SAM provider, which reads no AWS::ApiGateway::Method:
// `sam local start-api` then finds no route.
func TestRoutesOfPlainMethods(t *testing.T) {
	routes, provider := LocalRoutes(load(t, "testdata/template-before-sam-api.yaml"))
	if provider != "sam" || len(routes) != 0 {
		t.Errorf("provider %q, routes %+v; want the SAM provider and no route", provider, routes)
	}
}

func TestRoutesFromEvents(t *testing.T) {
	tpl, err := Decode([]byte(`
Transform: AWS::Serverless-2016-10-31
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        Api:
          Type: Api
          Properties: {RestApiId: !Ref Rest, Path: "/api/v1/{proxy+}", Method: ANY}
        Implicit:
          Type: Api
          Properties: {Path: /ping, Method: get}
        Http:
          Type: HttpApi
          Properties: {Path: /h, Method: POST}
        Tick:
          Type: Schedule
          Properties: {Schedule: rate(5 minutes)}
  Rest:
    Type: AWS::Serverless::Api
    Properties:
      StageName: prod
      DefinitionBody:
        paths:
          /body:
            post:
              x-amazon-apigateway-integration:
                type: aws_proxy
                uri: !Sub arn:aws:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${Fn.Arn}/invocations
          /streamed:
            post:
              x-amazon-apigateway-integration:
                type: AWS_PROXY
                uri: !Sub arn:aws:apigateway:${AWS::Region}:lambda:path/2021-11-15/functions/${Fn.Arn}/response-streaming-invocations
          /plain:
            get:
              x-amazon-apigateway-integration:
                type: aws
                uri: !Sub arn:aws:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${Fn.Arn}/invocations
          /literal:
            get:
              x-amazon-apigateway-integration:
                type: aws_proxy
                uri: arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/arn:aws:lambda:us-east-1:123456789012:function:Other/invocations
`))
	if err != nil {
		t.Fatal(err)
	}
	routes, provider := LocalRoutes(tpl)
	want := []Route{
		{Path: "/api/v1/{proxy+}", Method: "ANY", Function: "Fn", API: "Rest", Event: "Api"},
		{Path: "/body", Method: "POST", Function: "Fn", API: "Rest", Event: "Api"},
		{Path: "/h", Method: "POST", Function: "Fn", API: "ServerlessHttpApi", Event: "HttpApi"},
		{Path: "/literal", Method: "GET", Function: "Other", API: "Rest", Event: "Api"},
		{Path: "/ping", Method: "get", Function: "Fn", API: "ServerlessRestApi", Event: "Api"},
		{Path: "/streamed", Method: "POST", Function: "Fn", API: "Rest", Event: "Api"},
	}
	if diff := cmp.Diff(want, routes); provider != "sam" || diff != "" {
		t.Errorf("provider %q, routes (-want +got):\n%s", provider, diff)
	}
}

// TestRoutesCloudFormationProvider: a template whose first API-ish resource
// is AWS::ApiGateway::* is read by SAM CLI's CloudFormation provider, which
// does read methods.
func TestRoutesCloudFormationProvider(t *testing.T) {
	tpl, err := Decode([]byte(`
Resources:
  Rest:
    Type: AWS::ApiGateway::RestApi
  V1:
    Type: AWS::ApiGateway::Resource
    Properties: {RestApiId: !Ref Rest, ParentId: !GetAtt Rest.RootResourceId, PathPart: v1}
  Proxy:
    Type: AWS::ApiGateway::Resource
    Properties: {RestApiId: !Ref Rest, ParentId: !Ref V1, PathPart: "{proxy+}"}
  Method:
    Type: AWS::ApiGateway::Method
    Properties:
      RestApiId: !Ref Rest
      ResourceId: !Ref Proxy
      HttpMethod: ANY
      Integration:
        Uri: !Sub arn:aws:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${Fn.Arn}/invocations
  Fn:
    Type: AWS::Serverless::Function
`))
	if err != nil {
		t.Fatal(err)
	}
	routes, provider := LocalRoutes(tpl)
	want := []Route{{Path: "/v1/{proxy+}", Method: "ANY", Function: "Fn", Event: "Api"}}
	if diff := cmp.Diff(want, routes); provider != "cfn" || diff != "" {
		t.Errorf("provider %q, routes (-want +got):\n%s", provider, diff)
	}
}

func TestLocalEnv(t *testing.T) {
	tpl, err := Decode([]byte(`
Parameters:
  Stage: {Type: String, Default: prod}
  Secret: {Type: String, Default: app/keys}
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: bootstrap
      MemorySize: 1024
      Timeout: 900
      Environment:
        Variables:
          TABLE: !Ref Table
          STAGE: !Ref Stage
          KEY: !Sub "{{resolve:secretsmanager:${Secret}:SecretString:KEY}}"
          FLAG: true
          PLAIN: "x"
          OVERRIDDEN: "template"
          ALL: "template"
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := LocalEnv(tpl, "Fn", []byte(`{"Parameters": {"ALL": "global", "UNDECLARED": "1"}, "Fn": {"OVERRIDDEN": "file", "ALSO_UNDECLARED": "2", "FLAG": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"AWS_SAM_LOCAL": "true", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "AWS_LAMBDA_FUNCTION_TIMEOUT": "900",
		"AWS_LAMBDA_FUNCTION_HANDLER": "bootstrap", "AWS_LAMBDA_FUNCTION_NAME": "Fn", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
		"AWS_LAMBDA_LOG_GROUP_NAME": "aws/lambda/Fn", "AWS_LAMBDA_LOG_STREAM_NAME": "$LATEST",
		"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "defaultkey",
		"AWS_SECRET_ACCESS_KEY": "defaultsecret", "AWS_ACCOUNT_ID": "123456789012", "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
		"TABLE": "Table", "STAGE": "prod", "KEY": "{{resolve:secretsmanager:app/keys:SecretString:KEY}}",
		"FLAG": "false", "PLAIN": "x", "OVERRIDDEN": "file", "ALL": "global",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := LocalEnv(tpl, "Table", nil); err == nil {
		t.Error("LocalEnv of a table: no error")
	}
	if _, err := LocalEnv(tpl, "Fn", []byte(`{"Fn": "not a map"}`)); err == nil {
		t.Error("a malformed --env-vars file: no error")
	}
}
