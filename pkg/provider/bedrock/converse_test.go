package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

// convSDKOpts compare the SDK's structs: documents by the JSON the SDK sends
// of them, and the structs' unexported (empty) fields not at all.
var convSDKOpts = cmp.Options{
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

// convPNG is the image of convPNGURL.
var convPNG = []byte("\x89PNG\r\n\x1a\n")

const convPNGURL = "data:image/png;base64,iVBORw0KGgo="

// convConversation exercises every message role and content kind.
const convConversation = `{"model":"amazon.nova-pro-v1:0","stream":true,"stream_options":{"include_usage":true},
"messages":[
 {"role":"system","content":"Be brief."},
 {"role":"developer","content":[{"type":"text","text":"Use metric"},{"type":"text","text":" units."}]},
 {"role":"user","content":[{"type":"text","text":"Weather here?"},{"type":"image_url","image_url":{"url":"` + convPNGURL + `","detail":"low"}}]},
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

func convText(s string) types.ContentBlock { return &types.ContentBlockMemberText{Value: s} }

func convToolResult(id, s string) types.ContentBlock {
	return &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
		ToolUseId: aws.String(id),
		Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: s}},
	}}
}

func convToolSpec(name, description string, strict bool, schema any) types.Tool {
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
var convEmptySchema = map[string]any{"type": "object", "properties": map[string]any{}}

var convWeatherTool = convToolSpec("get_weather", "", false, convEmptySchema)

func TestConverseInput(t *testing.T) {
	user := func(body string) string {
		return `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}],` + body + `}`
	}
	hi := []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{convText("Hi")}}}
	tools := `"tools":[{"type":"function","function":{"name":"get_weather"}}]`
	tests := []struct {
		name, model, body string
		want              *bedrockruntime.ConverseStreamInput
	}{{
		name:  "conversation",
		model: "amazon.nova-pro-v1:0",
		body:  convConversation,
		want: &bedrockruntime.ConverseStreamInput{
			ModelId: aws.String("amazon.nova-pro-v1:0"),
			System:  []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "Be brief.\n\nUse metric units."}},
			Messages: []types.Message{
				{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
					convText("Weather here?"),
					&types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatPng, Source: &types.ImageSourceMemberBytes{Value: convPNG}}},
				}},
				{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{
					convText("Checking."),
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
					convToolResult("call_1", "18C"), convToolResult("call_2", "09:00"), convText("Thanks"), convText("no"),
				}},
			},
			ToolConfig: &types.ToolConfiguration{
				Tools: []types.Tool{
					convToolSpec("get_weather", "Weather of a city", true, map[string]any{
						"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"},
					}),
					convToolSpec("get_time", "", false, convEmptySchema),
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
			ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{convWeatherTool}, ToolChoice: &types.ToolChoiceMemberAny{}}},
	}, {
		name:  "tool_choice a function",
		model: "meta.llama3",
		body:  user(tools + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`),
		want: &bedrockruntime.ConverseStreamInput{ModelId: aws.String("meta.llama3"), Messages: hi,
			ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{convWeatherTool},
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
			ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{convWeatherTool}}},
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
				convText("a"),
				&types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatJpeg, Source: &types.ImageSourceMemberBytes{Value: []byte{0xff, 0xd8, 0xff}}}},
			},
		}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := converseInput(tt.model, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, convSDKOpts); diff != "" {
				t.Errorf("converseInput (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConverseInputWire sends a translation through the SDK's own
// serializer (to an HTTP client that answers nothing) and checks the body
// Bedrock would get.
func TestConverseInputWire(t *testing.T) {
	in, _, err := converseInput("amazon.nova-pro-v1:0", []byte(convConversation))
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
		HTTPClient: convDoFunc(func(r *http.Request) (*http.Response, error) {
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

type convDoFunc func(*http.Request) (*http.Response, error)

func (f convDoFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestConverseInputRefused(t *testing.T) {
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
			in, _, err := converseInput("m", []byte(body))
			convCheckRejected(t, in, err, tt.field+" is not supported on Bedrock Converse", true)
		})
	}
}

func TestConverseInputRejected(t *testing.T) {
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
		{"an image in a system message", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"` + convPNGURL + `"}}]},{"role":"user","content":"Hi"}]}`,
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
			in, _, err := converseInput("m", []byte(tt.body))
			convCheckRejected(t, in, err, tt.msg, false)
		})
	}
}

// convCheckRejected checks that a translation failed with a FailRejected
// *llm.ProviderError whose message is msg (exact), or starts with it.
func convCheckRejected(t *testing.T, in *bedrockruntime.ConverseStreamInput, err error, msg string, exact bool) {
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

func TestConverseInputDropped(t *testing.T) {
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"user":"u1","metadata":{"k":"v"},
		"messages":[{"role":"user","content":"Hi","name":"ann"}],
		"store":false,"service_tier":"default","parallel_tool_calls":false,"prompt_cache_key":"k","safety_identifier":"s",
		"seed":7,"frequency_penalty":0.5,"presence_penalty":0.5,"reasoning_effort":"high","top_k":5,"verbosity":null,
		"something_new":1,"n":1,"logit_bias":{}}`
	in, dropped, err := converseInput("m", []byte(body))
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

	_, dropped, err = converseInput("m", []byte(convConversation))
	if err != nil || dropped != nil {
		t.Errorf("conversation: dropped %q, err %v; want none", dropped, err)
	}
}

const convCreated = 1735689600

// convChunk is the wire form of a chunk of one choice.
func convChunk(delta, finish string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"amazon.nova-pro-v1:0","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
}

func convBlockDelta(i int32, d types.ContentBlockDelta) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(i), Delta: d}}
}

func convToolStart(i int32, id, name string) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{
		ContentBlockIndex: aws.Int32(i),
		Start:             &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String(id), Name: aws.String(name)}},
	}}
}

func convBlockStop(i int32) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockStop{Value: types.ContentBlockStopEvent{ContentBlockIndex: aws.Int32(i)}}
}

func convTextDelta(i int32, s string) types.ConverseStreamOutput {
	return convBlockDelta(i, &types.ContentBlockDeltaMemberText{Value: s})
}

func convInputDelta(i int32, s string) types.ConverseStreamOutput {
	return convBlockDelta(i, &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(s)}})
}

// convDecodeAll decodes events and returns the chunks and the error that
// stopped it. Each chunk is checked to be what llm.ParseChunk reads of its
// JSON, in every field the pipeline reads and in what a codec reads of its
// choice.
func convDecodeAll(t *testing.T, events ...types.ConverseStreamOutput) ([]llm.Chunk, error) {
	t.Helper()
	d := newConverseDecoder("chatcmpl-1", "amazon.nova-pro-v1:0", convCreated)
	var out []llm.Chunk
	for _, ev := range events {
		c, ok, err := d.decode(ev)
		if ok {
			parsed, perr := llm.ParseChunk(c.Raw)
			if perr != nil {
				t.Fatalf("chunk %s: %v", c.Raw, perr)
			}
			if diff := cmp.Diff(parsed, c, cmpopts.IgnoreUnexported(llm.Chunk{})); diff != "" {
				t.Errorf("chunk %s (-parsed +decoded):\n%s", c.Raw, diff)
			}
			if got, want := convFirstChoice(&c), convFirstChoice(&parsed); !slices.Equal(got, want) {
				t.Errorf("chunk %s: FirstChoice %q, parsed %q", c.Raw, got, want)
			}
			out = append(out, c)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// convFirstChoice is what a codec reads of a chunk's first choice.
func convFirstChoice(c *llm.Chunk) []string {
	var got []string
	finish := c.FirstChoice(&llm.DeltaFuncs{
		Text:      func(s string) { got = append(got, "text "+s) },
		Refusal:   func(s string) { got = append(got, "refusal "+s) },
		Reasoning: func(s string) { got = append(got, "reasoning "+s) },
		ToolCall: func(index int, id, name, args string) {
			got = append(got, fmt.Sprintf("tool %d %s %s %s", index, id, name, args))
		},
	})
	return append(got, "finish "+finish)
}

func TestConverseDecoder(t *testing.T) {
	events := []types.ConverseStreamOutput{
		&types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}},
		convBlockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: &types.ReasoningContentBlockDeltaMemberText{Value: "Think."}}),
		convBlockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: &types.ReasoningContentBlockDeltaMemberSignature{Value: "sig"}}),
		convBlockStop(0),
		convTextDelta(1, "Hel"),
		convTextDelta(1, ""),
		convTextDelta(1, "lo <b>"),
		convBlockStop(1),
		convToolStart(2, "tooluse_1", "get_weather"),
		convInputDelta(2, `{"city":`),
		convInputDelta(2, `"Paris"}`),
		convBlockStop(2),
		convToolStart(3, "tooluse_2", "get_time"),
		convBlockStop(3),
		&types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonToolUse}},
		&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: &types.TokenUsage{
			InputTokens: aws.Int32(100), OutputTokens: aws.Int32(20), TotalTokens: aws.Int32(155),
			CacheReadInputTokens: aws.Int32(30), CacheWriteInputTokens: aws.Int32(5),
		}}},
	}
	chunks, err := convDecodeAll(t, events...)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Raw          string
		Output       bool
		FinishReason string
		Text         string
	}
	var got []seen
	for _, c := range chunks {
		got = append(got, seen{string(c.Raw), c.Output, c.FinishReason, c.Text})
	}
	want := []seen{
		{convChunk(`{"role":"assistant","content":""}`, "null"), false, "", ""},
		{convChunk(`{"reasoning_content":"Think."}`, "null"), true, "", "Think."},
		{convChunk(`{"content":"Hel"}`, "null"), true, "", "Hel"},
		{convChunk(`{"content":"lo <b>"}`, "null"), true, "", "lo <b>"},
		{convChunk(`{"tool_calls":[{"index":0,"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"), true, "", "get_weather"},
		{convChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null"), true, "", `{"city":`},
		{convChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null"), true, "", `"Paris"}`},
		{convChunk(`{"tool_calls":[{"index":1,"id":"tooluse_2","type":"function","function":{"name":"get_time","arguments":""}}]}`, "null"), true, "", "get_time"},
		{convChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, "null"), true, "", "{}"},
		{convChunk(`{}`, `"tool_calls"`), false, "tool_calls", ""},
		{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"amazon.nova-pro-v1:0","choices":[],` +
			`"usage":{"prompt_tokens":135,"completion_tokens":20,"total_tokens":155,"prompt_tokens_details":{"cached_tokens":30,"cache_write_tokens":5}}}`, false, "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}

	last := chunks[len(chunks)-1]
	if last.HasChoices || last.Usage == nil {
		t.Fatalf("the last chunk is not usage-only: %s", last.Raw)
	}
	u, err := llm.ParseUsage(last.Usage)
	if err != nil {
		t.Fatal(err)
	}
	uncached, read, write := u.PromptParts()
	gotUsage := []int{u.PromptTokens, u.CompletionTokens, u.TotalTokens, uncached, read, write}
	if diff := cmp.Diff([]int{135, 20, 155, 100, 30, 5}, gotUsage); diff != "" {
		t.Errorf("usage [prompt completion total uncached cache-read cache-write] (-want +got):\n%s", diff)
	}

	var a llm.Assembler
	for _, c := range chunks {
		if err := a.AddChunk(&c); err != nil {
			t.Fatal(err)
		}
	}
	answer, err := a.Answer(u)
	if err != nil {
		t.Fatal(err)
	}
	msg := answer.Choices[0].Message
	wantMsg := chat.Message{Role: "assistant", Content: aws.String("Hello <b>"), ReasoningContent: aws.String("Think."), ToolCalls: []chat.ToolCall{
		{ID: "tooluse_1", Type: "function", Function: chat.Function{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
		{ID: "tooluse_2", Type: "function", Function: chat.Function{Name: "get_time", Arguments: `{}`}},
	}}
	msg.Refusal = nil
	if diff := cmp.Diff(wantMsg, msg); diff != "" {
		t.Errorf("assembled message (-want +got):\n%s", diff)
	}
}

func TestConverseDecoderFinishReason(t *testing.T) {
	tests := map[types.StopReason]string{
		types.StopReasonEndTurn:                    "stop",
		types.StopReasonStopSequence:               "stop",
		types.StopReasonMaxTokens:                  "length",
		types.StopReasonModelContextWindowExceeded: "length",
		types.StopReasonToolUse:                    "tool_calls",
		types.StopReasonGuardrailIntervened:        "content_filter",
		types.StopReasonContentFiltered:            "content_filter",
		types.StopReasonMalformedModelOutput:       "stop",
		types.StopReasonMalformedToolUse:           "stop",
		"":                                         "stop",
		"something_new":                            "stop",
	}
	for reason, want := range tests {
		chunks, err := convDecodeAll(t, &types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: reason}})
		if err != nil || len(chunks) != 1 || chunks[0].FinishReason != want {
			t.Errorf("%q: chunks %v, err %v; want one with finish_reason %q", reason, chunks, err, want)
		}
	}
}

func TestConverseDecoderUsage(t *testing.T) {
	tests := []struct {
		name  string
		usage *types.TokenUsage
		want  string // the usage object, "" for no chunk
	}{
		{"no cache", &types.TokenUsage{InputTokens: aws.Int32(12), OutputTokens: aws.Int32(3)},
			`{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}`},
		{"cache reads only", &types.TokenUsage{InputTokens: aws.Int32(2), OutputTokens: aws.Int32(3), CacheReadInputTokens: aws.Int32(10)},
			`{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":10}}`},
		{"no counts", &types.TokenUsage{}, `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`},
		{"negative counts", &types.TokenUsage{InputTokens: aws.Int32(-1), OutputTokens: aws.Int32(4)},
			`{"prompt_tokens":0,"completion_tokens":4,"total_tokens":4}`},
		{"no usage", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := convDecodeAll(t, &types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: tt.usage}})
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if len(chunks) == 1 {
				got = string(chunks[0].Usage)
			}
			if len(chunks) > 1 || got != tt.want {
				t.Errorf("chunks %d, usage %s; want %s", len(chunks), got, tt.want)
			}
		})
	}
}

func TestConverseDecoderExceptions(t *testing.T) {
	tests := []struct {
		tag, value string
		class      llm.FailureClass
		msg        string
	}{
		{"throttlingException", `{"message":"Too many requests"}`, llm.FailThrottled, "throttlingException: Too many requests"},
		{"validationException", `{"message":"The model returned an invalid tool use"}`, llm.FailRejected, "The model returned an invalid tool use"},
		{"validationException", ``, llm.FailRejected, "validationException"},
		{"modelStreamErrorException", `{"Message":"broken"}`, llm.FailTransient, "modelStreamErrorException: broken"},
		{"internalServerException", `not json`, llm.FailTransient, "internalServerException"},
		{"serviceUnavailableException", `{}`, llm.FailTransient, "serviceUnavailableException"},
	}
	for _, tt := range tests {
		t.Run(tt.tag, func(t *testing.T) {
			chunks, err := convDecodeAll(t, &types.UnknownUnionMember{Tag: tt.tag, Value: []byte(tt.value)})
			var pe *llm.ProviderError
			if len(chunks) != 0 || !errors.As(err, &pe) {
				t.Fatalf("chunks %d, err %v; want a *llm.ProviderError", len(chunks), err)
			}
			if pe.Class != tt.class || pe.Message != tt.msg {
				t.Errorf("class %v, message %q; want %v, %q", pe.Class, pe.Message, tt.class, tt.msg)
			}
		})
	}
	chunks, err := convDecodeAll(t, &types.UnknownUnionMember{Tag: "somethingNew", Value: []byte(`{}`)})
	if len(chunks) != 0 || err != nil {
		t.Errorf("an unknown member: chunks %d, err %v; want nothing", len(chunks), err)
	}
}

// TestConverseDecoderNil decodes events with nothing in them: every nil
// pointer of the SDK's types, and members of no kind the decoder reads.
func TestConverseDecoderNil(t *testing.T) {
	events := []types.ConverseStreamOutput{
		nil,
		(*types.ConverseStreamOutputMemberMessageStart)(nil),
		(*types.ConverseStreamOutputMemberContentBlockStart)(nil),
		(*types.ConverseStreamOutputMemberContentBlockDelta)(nil),
		(*types.ConverseStreamOutputMemberContentBlockStop)(nil),
		(*types.ConverseStreamOutputMemberMessageStop)(nil),
		(*types.ConverseStreamOutputMemberMetadata)(nil),
		(*types.UnknownUnionMember)(nil),
		&types.ConverseStreamOutputMemberContentBlockStart{},
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{Start: (*types.ContentBlockStartMemberToolUse)(nil)}},
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{Start: &types.ContentBlockStartMemberImage{}}},
		&types.ConverseStreamOutputMemberContentBlockDelta{},
		convBlockDelta(0, (*types.ContentBlockDeltaMemberText)(nil)),
		convBlockDelta(0, (*types.ContentBlockDeltaMemberToolUse)(nil)),
		convBlockDelta(0, (*types.ContentBlockDeltaMemberReasoningContent)(nil)),
		convBlockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{}),
		convBlockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{Value: (*types.ReasoningContentBlockDeltaMemberText)(nil)}),
		convBlockDelta(0, &types.ContentBlockDeltaMemberToolUse{}),
		convBlockDelta(0, &types.ContentBlockDeltaMemberCitation{}),
		convInputDelta(0, `{"a":1}`), // no tool call started: nowhere to put it
		&types.ConverseStreamOutputMemberContentBlockStop{},
		&types.ConverseStreamOutputMemberMetadata{},
	}
	chunks, err := convDecodeAll(t, events...)
	if err != nil || len(chunks) != 0 {
		t.Errorf("chunks %d, err %v; want none", len(chunks), err)
	}

	// A tool call whose start names nothing, and input for a block whose
	// index is not given: it goes to the tool call started last.
	chunks, err = convDecodeAll(t,
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{Start: &types.ContentBlockStartMemberToolUse{}}},
		&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{
			ContentBlockIndex: aws.Int32(7), Delta: &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String("{}")}},
		}},
		&types.ConverseStreamOutputMemberContentBlockStop{},
	)
	var raws []string
	for _, c := range chunks {
		raws = append(raws, string(c.Raw))
	}
	want := []string{
		convChunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"","arguments":""}}]}`, "null"),
		convChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, "null"),
	}
	if diff := cmp.Diff(want, raws); err != nil || diff != "" {
		t.Errorf("err %v, chunks (-want +got):\n%s", err, diff)
	}
}

func FuzzConverseInput(f *testing.F) {
	for _, seed := range []string{
		convConversation,
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
		in, _, err := converseInput("m", body)
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
					convMustMarshal(t, use.Value.Input)
				}
			}
		}
		if in.ToolConfig != nil {
			for _, tool := range in.ToolConfig.Tools {
				convMustMarshal(t, tool.(*types.ToolMemberToolSpec).Value.InputSchema.(*types.ToolInputSchemaMemberJson).Value)
			}
		}
	})
}

// convMustMarshal checks that the SDK can write d as JSON.
func convMustMarshal(t *testing.T, d document.Interface) {
	t.Helper()
	b, err := d.MarshalSmithyDocument()
	if err != nil || !json.Valid(b) {
		t.Fatalf("document %s: %v", b, err)
	}
}
