package converse

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithydocument "github.com/aws/smithy-go/document"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// sdkOpts compare the SDK's structs: documents by the JSON the SDK sends
// of them, and the structs' unexported (empty) fields not at all.
var sdkOpts = cmp.Options{
	cmp.Transformer("document", func(d document.Interface) string {
		if d == nil {
			return "<nil>"
		}
		b, err := d.MarshalSmithyDocument()
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}),
	cmp.FilterPath(func(p cmp.Path) bool {
		sf, ok := p.Last().(cmp.StructField)
		return ok && !unicode.IsUpper([]rune(sf.Name())[0])
	}, cmp.Ignore()),
}

// pngBytes is the image of pngURL.
var pngBytes = []byte("\x89PNG\r\n\x1a\n")

const pngURL = "data:image/png;base64,iVBORw0KGgo="

// conversation exercises every message role and content kind.
const conversation = `{"model":"amazon.nova-pro-v1:0","stream":true,"stream_options":{"include_usage":true},
"messages":[
 {"role":"system","content":"Be brief."},
 {"role":"developer","content":[{"type":"text","text":"Use metric"},{"type":"text","text":" units."}]},
 {"role":"user","content":[{"type":"text","text":"Weather here?"},{"type":"image_url","image_url":{"url":"` + pngURL + `","detail":"low"}}]},
 {"role":"assistant","content":"Checking.","tool_calls":[
   {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"id\":12345678901234567890,\"days\":[1,2.5]}"}},
   {"id":"call_2","type":"function","function":{"name":"get_time","arguments":""}}]},
 {"role":"tool","tool_call_id":"call_1","content":"18C"},
 {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"09:00"}]},
 {"role":"user","content":"Thanks"},
 {"role":"user","content":[{"type":"text","text":""},{"type":"refusal","refusal":"no"}]}
],
"tools":[
 {"type":"function","function":{"name":"get_weather","description":"Weather of a city","strict":true,
   "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
 {"type":"function","function":{"name":"get_time"}}],
"tool_choice":"auto",
"max_completion_tokens":256,"max_tokens":100,"temperature":0.5,"top_p":0.9,"stop":["END",""],
"n":1,"logprobs":false,"top_logprobs":0,"logit_bias":{ },"modalities":["text"],"response_format":{"type":"text"}}`

func textBlock(s string) types.ContentBlock { return &types.ContentBlockMemberText{Value: s} }

func toolResultBlock(id, s string) types.ContentBlock {
	return &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
		ToolUseId: aws.String(id),
		Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: s}},
	}}
}

func toolSpec(name, description string, strict bool, schema any) types.Tool {
	spec := types.ToolSpecification{Name: aws.String(name), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)}}
	if description != "" {
		spec.Description = aws.String(description)
	}
	if strict {
		spec.Strict = aws.Bool(true)
	}
	return &types.ToolMemberToolSpec{Value: spec}
}

// emptySchema is the input schema of a tool that gives no parameters.
var emptySchema = map[string]any{"type": "object", "properties": map[string]any{}}

var weatherTool = toolSpec("get_weather", "", false, emptySchema)

func TestFromHub(t *testing.T) {
	user := func(body string) string {
		return `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}],` + body + `}`
	}
	hi := []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{textBlock("Hi")}}}
	tools := `"tools":[{"type":"function","function":{"name":"get_weather"}}]`
	tests := []struct {
		name, model, body string
		want              *bedrockruntime.ConverseStreamInput
	}{{
		name:  "conversation",
		model: "amazon.nova-pro-v1:0",
		body:  conversation,
		want: &bedrockruntime.ConverseStreamInput{
			ModelId: aws.String("amazon.nova-pro-v1:0"),
			System:  []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "Be brief.\n\nUse metric units."}},
			Messages: []types.Message{
				{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
					textBlock("Weather here?"),
					&types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatPng, Source: &types.ImageSourceMemberBytes{Value: pngBytes}}},
				}},
				{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{
					textBlock("Checking."),
					&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
						ToolUseId: aws.String("call_1"), Name: aws.String("get_weather"),
						Input: document.NewLazyDocument(map[string]any{
							"city": "Paris",
							"id":   smithydocument.Number("12345678901234567890"), // not rounded
							"days": []any{1, 2.5},
						}),
					}},
					&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
						ToolUseId: aws.String("call_2"), Name: aws.String("get_time"),
						Input: document.NewLazyDocument(map[string]any{}),
					}},
				}},
				{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
					toolResultBlock("call_1", "18C"), toolResultBlock("call_2", "09:00"), textBlock("Thanks"), textBlock("no"),
				}},
			},
			ToolConfig: &types.ToolConfiguration{
				Tools: []types.Tool{
					toolSpec("get_weather", "Weather of a city", true, map[string]any{
						"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"},
					}),
					toolSpec("get_time", "", false, emptySchema),
				},
				ToolChoice: &types.ToolChoiceMemberAuto{},
			},
			InferenceConfig: &types.InferenceConfiguration{
				MaxTokens: aws.Int32(256), Temperature: aws.Float32(0.5), TopP: aws.Float32(0.9), StopSequences: []string{"END"},
			},
		},
	}, {
		name: "model from the body when none is given",
		body: user(`"x":null`),
		want: &bedrockruntime.ConverseStreamInput{ModelId: aws.String("m"), Messages: hi},
	}, {
		name:  "tool_choice required",
		model: "meta.llama3",
		body:  user(tools + `,"tool_choice":"required"`),
		want: &bedrockruntime.ConverseStreamInput{ModelId: aws.String("meta.llama3"), Messages: hi,
			ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{weatherTool}, ToolChoice: &types.ToolChoiceMemberAny{}}},
	}, {
		name:  "tool_choice a function",
		model: "meta.llama3",
		body:  user(tools + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`),
		want: &bedrockruntime.ConverseStreamInput{ModelId: aws.String("meta.llama3"), Messages: hi,
			ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{weatherTool},
				ToolChoice: &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String("get_weather")}}}},
	}, {
		name:  "tool_choice none leaves the tools out",
		model: "meta.llama3",
		body:  user(tools + `,"tool_choice":"none"`),
		want:  &bedrockruntime.ConverseStreamInput{ModelId: aws.String("meta.llama3"), Messages: hi},
	}, {
		name:  "no tool_choice: Converse's default",
		model: "meta.llama3",
		body:  user(tools),
		want: &bedrockruntime.ConverseStreamInput{ModelId: aws.String("meta.llama3"), Messages: hi,
			ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{weatherTool}}},
	}, {
		name:  "tool_choice without tools",
		model: "meta.llama3",
		body:  user(`"tool_choice":"required","tools":[]`),
		want:  &bedrockruntime.ConverseStreamInput{ModelId: aws.String("meta.llama3"), Messages: hi},
	}, {
		name:  "max_tokens and a stop string",
		model: "mistral.large",
		body:  user(`"max_tokens":50,"stop":"END","temperature":0`),
		want: &bedrockruntime.ConverseStreamInput{ModelId: aws.String("mistral.large"), Messages: hi,
			InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(50), Temperature: aws.Float32(0), StopSequences: []string{"END"}}},
	}, {
		name:  "nothing to configure",
		model: "mistral.large",
		body:  user(`"stop":[],"max_tokens":null,"top_p":null`),
		want:  &bedrockruntime.ConverseStreamInput{ModelId: aws.String("mistral.large"), Messages: hi},
	}, {
		name:  "an assistant turn with nothing in it is left out; the user turns around it merge",
		model: "deepseek.r1",
		body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":null},{"role":"assistant","content":""},
			{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/JPEG;base64,/9j/"}}]}]}`,
		want: &bedrockruntime.ConverseStreamInput{ModelId: aws.String("deepseek.r1"), Messages: []types.Message{{
			Role: types.ConversationRoleUser, Content: []types.ContentBlock{
				textBlock("a"),
				&types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatJpeg, Source: &types.ImageSourceMemberBytes{Value: []byte{0xff, 0xd8, 0xff}}}},
			},
		}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := FromHub(&llm.UpstreamRequest{Model: tt.model, Body: []byte(tt.body)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, sdkOpts); diff != "" {
				t.Errorf("FromHub (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFromHubWire sends a translation through the SDK's own
// serializer (to an HTTP client that answers nothing) and checks the body
// Bedrock would get.
func TestFromHubWire(t *testing.T) {
	in, _, err := FromHub(&llm.UpstreamRequest{Model: "amazon.nova-pro-v1:0", Body: []byte(conversation)})
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	client := bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "example"}, nil
		}),
		Retryer: aws.NopRetryer{},
		HTTPClient: doFunc(func(r *http.Request) (*http.Response, error) {
			body, _ = io.ReadAll(r.Body)
			return nil, errors.New("not sent")
		}),
	})
	if _, err := client.ConverseStream(context.Background(), in); err == nil {
		t.Fatal("ConverseStream succeeded without an answer")
	}
	var got struct {
		Messages []struct {
			Role    string
			Content []map[string]json.RawMessage
		}
		ToolConfig struct {
			Tools []struct {
				ToolSpec struct {
					Name        string
					InputSchema struct{ JSON json.RawMessage }
				}
			}
		}
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("the body is not JSON: %v\n%s", err, body)
	}
	if len(got.Messages) != 3 || len(got.Messages[1].Content) != 3 || len(got.ToolConfig.Tools) != 2 {
		t.Fatalf("unexpected body %s", body)
	}
	var use struct{ Input json.RawMessage }
	if err := json.Unmarshal(got.Messages[1].Content[1]["toolUse"], &use); err != nil {
		t.Fatal(err)
	}
	if want := `{"city":"Paris","days":[1,2.5],"id":12345678901234567890}`; string(use.Input) != want {
		t.Errorf("toolUse.input = %s, want %s", use.Input, want)
	}
	schema := string(got.ToolConfig.Tools[0].ToolSpec.InputSchema.JSON)
	if want := `{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`; schema != want {
		t.Errorf("inputSchema.json = %s, want %s", schema, want)
	}
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestFromHubRefused(t *testing.T) {
	tests := []struct{ field, value string }{
		{"n", `2`},
		{"logprobs", `true`},
		{"top_logprobs", `3`},
		{"logit_bias", `{"50256":-100}`},
		{"audio", `{"voice":"alloy","format":"wav"}`},
		{"modalities", `["text","audio"]`},
		{"functions", `[{"name":"f"}]`},
		{"function_call", `"auto"`},
		{"response_format", `{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}`},
		{"response_format", `{"type":"json_object"}`},
		{"response_format", `"json"`},
	}
	for _, tt := range tests {
		t.Run(tt.field+"="+tt.value, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"` + tt.field + `":` + tt.value + `}`
			in, _, err := FromHub(&llm.UpstreamRequest{Model: "m", Body: []byte(body)})
			checkRejected(t, in, err, tt.field+" is not supported on Bedrock Converse", true)
		})
	}
}

func TestFromHubRejected(t *testing.T) {
	user := func(content string) string {
		return `{"messages":[{"role":"user","content":` + content + `}]}`
	}
	withUser := func(fields string) string {
		return `{"messages":[{"role":"user","content":"Hi"}],` + fields + `}`
	}
	tests := []struct{ name, body, msg string }{
		{"not an object", `[1]`, "the request body is not a JSON object"},
		{"no messages", `{"messages":[]}`, "messages must contain at least one user or assistant message"},
		{"only a system message", `{"messages":[{"role":"system","content":"Be brief."}]}`, "messages must contain at least one user or assistant message"},
		{"messages not an array", `{"messages":{}}`, "messages must be an array"},
		{"a message not an object", `{"messages":["hi"]}`, "messages[0] must be an object"},
		{"an unknown role", `{"messages":[{"role":"function","content":"x"}]}`, `messages[0].role "function" is not supported on Bedrock Converse`},
		{"an http image", user(`[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]`),
			"messages[0].content[0].image_url.url: an http(s) image URL is not supported on Bedrock Converse"},
		{"an image of another type", user(`[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]`),
			`messages[0].content[0].image_url.url: image type "image/tiff" is not supported on Bedrock Converse`},
		{"an image not base64", user(`[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!!"}}]`),
			"messages[0].content[0].image_url.url: the data: URL is not valid base64"},
		{"an image URL of nothing", user(`[{"type":"image_url","image_url":{"url":"s3://bucket/a.png"}}]`),
			"messages[0].content[0].image_url.url must be a base64 data: URL"},
		{"an image_url without its object", user(`[{"type":"image_url"}]`), "messages[0].content[0].image_url is required"},
		{"an audio part", user(`[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]`),
			`messages[0].content[0]: content part type "input_audio" is not supported on Bedrock Converse`},
		{"content of a number", user(`5`), "messages[0].content must be a string or an array of content parts"},
		{"an image in a system message", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"` + pngURL + `"}}]},{"role":"user","content":"Hi"}]}`,
			"messages[0].content may only hold text on Bedrock Converse"},
		{"a tool message without its call id", `{"messages":[{"role":"tool","content":"18C"}]}`, "messages[0].tool_call_id is required"},
		{"arguments not an object", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments must be a JSON object"},
		{"arguments not JSON", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments must be a JSON object"},
		{"arguments of an object", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]}]}`,
			"messages[0].tool_calls[0].function.arguments must be a string"},
		{"arguments with an empty key", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"\":1}"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments cannot be sent to Bedrock Converse"},
		{"a tool call of another type", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{}}]}]}`,
			`messages[0].tool_calls[0].type "custom" is not supported on Bedrock Converse`},
		{"a tool of another type", withUser(`"tools":[{"type":"custom","custom":{"name":"x"}}]`), `tools[0].type "custom" is not supported on Bedrock Converse`},
		{"parameters not an object", withUser(`"tools":[{"type":"function","function":{"name":"f","parameters":true}}]`),
			"tools[0].function.parameters must be a JSON object"},
		{"tools not an array", withUser(`"tools":{}`), "tools must be an array"},
		{"an unknown tool_choice", withUser(`"tool_choice":"maybe"`), `tool_choice "maybe" is not supported on Bedrock Converse`},
		{"a tool_choice of allowed tools", withUser(`"tool_choice":{"type":"allowed_tools","allowed_tools":{}}`), "tool_choice must be auto, none, required or a function"},
		{"max_tokens of 0", withUser(`"max_tokens":0`), "max_tokens must be an integer from 1 to 2147483647"},
		{"max_completion_tokens too large", withUser(`"max_completion_tokens":3000000000`), "max_completion_tokens must be an integer from 1 to 2147483647"},
		{"max_tokens not whole", withUser(`"max_tokens":1.5`), "max_tokens must be an integer from 1 to 2147483647"},
		{"temperature of a string", withUser(`"temperature":"hot"`), "temperature must be a number"},
		{"top_p out of float32", withUser(`"top_p":1e300`), "top_p must be a number"},
		{"stop of a number", withUser(`"stop":5`), "stop must be a string or an array of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, _, err := FromHub(&llm.UpstreamRequest{Model: "m", Body: []byte(tt.body)})
			checkRejected(t, in, err, tt.msg, false)
		})
	}
}

// checkRejected checks that a translation failed with a FailRejected
// *llm.ProviderError whose message is msg (exact), or starts with it.
func checkRejected(t *testing.T, in *bedrockruntime.ConverseStreamInput, err error, msg string, exact bool) {
	t.Helper()
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (input %v), want a *llm.ProviderError", err, in)
	}
	if in != nil {
		t.Errorf("an input with the error")
	}
	if pe.Class != llm.FailRejected {
		t.Errorf("class %v, want rejected", pe.Class)
	}
	if exact && pe.Message != msg || !strings.HasPrefix(pe.Message, msg) {
		t.Errorf("message %q, want %q", pe.Message, msg)
	}
}

func TestFromHubDropped(t *testing.T) {
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"user":"u1","metadata":{"k":"v"},
		"messages":[{"role":"user","content":"Hi","name":"ann"}],
		"store":false,"service_tier":"default","parallel_tool_calls":false,"prompt_cache_key":"k","safety_identifier":"s",
		"seed":7,"frequency_penalty":0.5,"presence_penalty":0.5,"reasoning_effort":"high","top_k":5,"verbosity":null,
		"something_new":1,"n":1,"logit_bias":{}}`
	in, dropped, err := FromHub(&llm.UpstreamRequest{Model: "m", Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user", "metadata", "store", "service_tier", "parallel_tool_calls", "prompt_cache_key", "safety_identifier",
		"seed", "frequency_penalty", "presence_penalty", "reasoning_effort", "top_k", "something_new", "messages[].name"}
	if diff := cmp.Diff(want, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if in.InferenceConfig != nil || in.ToolConfig != nil || in.AdditionalModelRequestFields != nil || in.RequestMetadata != nil || in.ServiceTier != nil {
		t.Errorf("a hint reached the input: %+v", in)
	}

	_, dropped, err = FromHub(&llm.UpstreamRequest{Model: "m", Body: []byte(conversation)})
	if err != nil || dropped != nil {
		t.Errorf("conversation: dropped %q, err %v; want none", dropped, err)
	}

	// Names are read exactly: a "Seed" is a field of its own.
	_, dropped, err = FromHub(&llm.UpstreamRequest{Model: "m", Body: []byte(`{"messages":[{"role":"user","content":"Hi","Name":"x"}],"Seed":1,"MAX_TOKENS":"x"}`)})
	if want := []string{"Seed", "MAX_TOKENS"}; err != nil || !slices.Equal(dropped, want) {
		t.Errorf("dropped %q, err %v; want %q", dropped, err, want)
	}
	// An object between spaces JSON does not allow is translated, its
	// fields left out unnamed but for a message's name.
	_, dropped, err = FromHub(&llm.UpstreamRequest{Model: "m", Body: []byte("\f" + `{"messages":[{"role":"user","content":"Hi","name":"x"}],"seed":1}`)})
	if want := []string{"messages[].name"}; err != nil || !slices.Equal(dropped, want) {
		t.Errorf("spaced: dropped %q, err %v; want %q", dropped, err, want)
	}
}

func FuzzFromHub(f *testing.F) {
	for _, seed := range []string{
		conversation,
		`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":[1,{\"b\":null}]}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/webp;base64,UklGRg=="}}]}],"stop":"x","max_tokens":5}`,
		`{"messages":[{"role":"user","content":"Hi"}],"n":2}`,
		`{"messages":[{"role":"user","content":"Hi","name":"a"}],"seed":1,"Messages":[]}`,
		`{}`, `null`, `[]`, `{"messages":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, _, err := FromHub(&llm.UpstreamRequest{Model: "m", Body: body})
		if err != nil {
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Class != llm.FailRejected || pe.Message == "" {
				t.Fatalf("err %v, want a FailRejected *llm.ProviderError", err)
			}
			if in != nil {
				t.Fatal("an input with the error")
			}
			return
		}
		if in == nil || aws.ToString(in.ModelId) != "m" || len(in.Messages) == 0 {
			t.Fatalf("input %+v without its model or messages", in)
		}
		for i, m := range in.Messages {
			if len(m.Content) == 0 || i > 0 && in.Messages[i-1].Role == m.Role {
				t.Fatalf("messages[%d] empty or of its predecessor's role", i)
			}
			for _, b := range m.Content {
				if use, ok := b.(*types.ContentBlockMemberToolUse); ok {
					mustMarshal(t, use.Value.Input)
				}
			}
		}
		if in.ToolConfig != nil {
			for _, tool := range in.ToolConfig.Tools {
				mustMarshal(t, tool.(*types.ToolMemberToolSpec).Value.InputSchema.(*types.ToolInputSchemaMemberJson).Value)
			}
		}
	})
}

// mustMarshal checks that the SDK can write d as JSON.
func mustMarshal(t *testing.T, d document.Interface) {
	t.Helper()
	b, err := d.MarshalSmithyDocument()
	if err != nil || !json.Valid(b) {
		t.Fatalf("document %s: %v", b, err)
	}
}
