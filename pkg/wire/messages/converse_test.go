package messages

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
)

// claudeCodeRequest is a request as Claude Code sends it: system blocks
// with cache_control, a system message among the turns, signed thinking,
// tools with cache_control on the last, and the hints it sets.
const claudeCodeRequest = `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,
"system":[
 {"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},
 {"type":"text","text":"Be concise.","cache_control":{"type":"ephemeral","ttl":"1h"}}],
"messages":[
 {"role":"user","content":[{"type":"text","text":"Fix the bug."},
   {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
 {"role":"system","content":[{"type":"text","text":"Tests must pass.","cache_control":{"type":"ephemeral"}}]},
 {"role":"user","content":"In main.go."},
 {"role":"assistant","content":[
   {"type":"thinking","thinking":"Read it first.","signature":"sig-1"},
   {"type":"redacted_thinking","data":"cmVkYWN0ZWQ="},
   {"type":"text","text":"Reading."},
   {"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"main.go","limit":20000000000000000001}}]},
 {"role":"user","content":[
   {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"package main"}],"cache_control":{"type":"ephemeral"}},
   {"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"not found"},
   {"type":"text","text":"Go on.","cache_control":{"type":"ephemeral"}}]}],
"tools":[
 {"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
 {"type":"custom","name":"Bash","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
"metadata":{"user_id":"user_abc"},
"thinking":{"type":"adaptive"},
"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},
"output_config":{"effort":"high"},
"temperature":1,"top_p":0.9,"stop_sequences":["END",""],"top_k":40}`

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

func converseBlockDelta(i int32, d types.ContentBlockDelta) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(i), Delta: d}}
}

func converseBlockStop(i int32) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberContentBlockStop{Value: types.ContentBlockStopEvent{ContentBlockIndex: aws.Int32(i)}}
}

func converseTextDelta(i int32, s string) types.ConverseStreamOutput {
	return converseBlockDelta(i, &types.ContentBlockDeltaMemberText{Value: s})
}

func converseInputDelta(i int32, s string) types.ConverseStreamOutput {
	return converseBlockDelta(i, &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(s)}})
}

// converseCache is the cache point a translation should give, written out
// here rather than taken from the code under test.
func converseCache() types.CachePointBlock {
	return types.CachePointBlock{Type: types.CachePointTypeDefault}
}

func converseDoc(t *testing.T, s string) document.Interface {
	t.Helper()
	d, err := converse.Document(json.RawMessage(s), "test")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func converseUser(s string) []types.Message {
	return []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: s}}}}
}

func TestToConverseClaudeCode(t *testing.T) {
	in, dropped, err := ToConverse("us.amazon.nova-pro-v1:0", []byte(claudeCodeRequest))
	if err != nil {
		t.Fatal(err)
	}
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgo=")
	want := &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String("us.amazon.nova-pro-v1:0"),
		System: []types.SystemContentBlock{
			&types.SystemContentBlockMemberText{Value: "You are Claude Code."},
			&types.SystemContentBlockMemberCachePoint{Value: converseCache()},
			&types.SystemContentBlockMemberText{Value: "Be concise."},
			&types.SystemContentBlockMemberCachePoint{Value: converseCache()},
			&types.SystemContentBlockMemberText{Value: "Tests must pass."},
			&types.SystemContentBlockMemberCachePoint{Value: converseCache()},
		},
		Messages: []types.Message{
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
				&types.ContentBlockMemberText{Value: "Fix the bug."},
				&types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatPng, Source: &types.ImageSourceMemberBytes{Value: png}}},
				&types.ContentBlockMemberText{Value: "In main.go."},
			}},
			{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{
				&types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberReasoningText{Value: types.ReasoningTextBlock{
					Text: aws.String("Read it first."), Signature: aws.String("sig-1"),
				}}},
				&types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberRedactedContent{Value: []byte("redacted")}},
				&types.ContentBlockMemberText{Value: "Reading."},
				&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String("toolu_1"), Name: aws.String("Read"),
					Input: converseDoc(t, `{"path":"main.go","limit":20000000000000000001}`),
				}},
			}},
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
				&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
					ToolUseId: aws.String("toolu_1"),
					Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: "package main"}},
				}},
				&types.ContentBlockMemberCachePoint{Value: converseCache()},
				&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
					ToolUseId: aws.String("toolu_2"),
					Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: "not found"}},
					Status:    types.ToolResultStatusError,
				}},
				&types.ContentBlockMemberText{Value: "Go on."},
				&types.ContentBlockMemberCachePoint{Value: converseCache()},
			}},
		},
		InferenceConfig: &types.InferenceConfiguration{
			MaxTokens: aws.Int32(32000), Temperature: aws.Float32(1), TopP: aws.Float32(0.9), StopSequences: []string{"END"},
		},
		ToolConfig: &types.ToolConfiguration{
			Tools: []types.Tool{
				&types.ToolMemberToolSpec{Value: types.ToolSpecification{
					Name: aws.String("Read"), Description: aws.String("Read a file"),
					InputSchema: &types.ToolInputSchemaMemberJson{Value: converseDoc(t, `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
				}},
				&types.ToolMemberToolSpec{Value: types.ToolSpecification{
					Name:        aws.String("Bash"),
					InputSchema: &types.ToolInputSchemaMemberJson{Value: converseDoc(t, `{"type":"object"}`)},
				}},
				&types.ToolMemberCachePoint{Value: converseCache()},
			},
			ToolChoice: &types.ToolChoiceMemberAuto{},
		},
	}
	if diff := cmp.Diff(want, in, sdkOpts); diff != "" {
		t.Errorf("input (-want +got):\n%s", diff)
	}
	wantDropped := []string{
		"cache_control.ttl", "tool_choice.disable_parallel_tool_use", "metadata", "thinking",
		"context_management", "output_config.effort", "top_k",
	}
	if diff := cmp.Diff(wantDropped, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
}

func TestToConverse(t *testing.T) {
	user := `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct {
		name        string
		body        string
		want        func(in *bedrockruntime.ConverseStreamInput)
		wantDropped []string
	}{{
		name: "minimal, the body's model when none is given",
		body: `{"model":"body-model",` + user + `}`,
	}, {
		name: "system string, consecutive turns merged",
		body: `{"system":"Be brief.","messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"b"}]},{"role":"assistant","content":"c"},{"role":"assistant","content":[]}]}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "Be brief."}}
			in.Messages = []types.Message{
				{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "a"}, &types.ContentBlockMemberText{Value: "b"}}},
				{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "c"}}},
			}
		},
	}, {
		name: "a cache point inside a tool result goes after it",
		body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[
			{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"5m"}},
			{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"UklGRg"}}]},
			{"type":"tool_result","tool_use_id":"t2"}]}]}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.Messages = []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
				&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{ToolUseId: aws.String("t1"), Content: []types.ToolResultContentBlock{
					&types.ToolResultContentBlockMemberText{Value: "x"},
					&types.ToolResultContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatWebp, Source: &types.ImageSourceMemberBytes{Value: []byte("RIFF")}}},
				}}},
				&types.ContentBlockMemberCachePoint{Value: converseCache()},
				&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{ToolUseId: aws.String("t2"), Content: []types.ToolResultContentBlock{
					&types.ToolResultContentBlockMemberText{Value: ""},
				}}},
			}}}
		},
	}, {
		name: "one cache point for blocks that leave nothing between",
		body: `{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}},{"type":"thinking","thinking":"","cache_control":{"type":"ephemeral"}}]}]}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.System = []types.SystemContentBlock{
				&types.SystemContentBlockMemberText{Value: "a"},
				&types.SystemContentBlockMemberCachePoint{Value: converseCache()},
			}
			in.Messages[0].Content = append(in.Messages[0].Content, &types.ContentBlockMemberCachePoint{Value: converseCache()})
		},
	}, {
		name: "a plain-text document is a text block",
		body: `{"messages":[{"role":"user","content":[{"type":"document","title":"Notes","source":{"type":"text","media_type":"text/plain","data":"Line."},"citations":{"enabled":true}}]}]}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.Messages = converseUser("Notes\n\nLine.")
		},
		wantDropped: []string{"citations"},
	}, {
		name: "tool_choice tool, strict tool, hints on the tool",
		body: `{` + user + `,"tools":[{"name":"f","strict":true,"defer_loading":true,"input_examples":[{}]}],"tool_choice":{"type":"tool","name":"f"}}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.ToolConfig = &types.ToolConfiguration{
				Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
					Name: aws.String("f"), Strict: aws.Bool(true),
					InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object", "properties": map[string]any{}})},
				}}},
				ToolChoice: &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String("f")}},
			}
		},
		wantDropped: []string{"tools[].defer_loading", "tools[].input_examples"},
	}, {
		name: "tool_choice any",
		body: `{` + user + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":false}}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.ToolConfig = &types.ToolConfiguration{
				Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
					Name: aws.String("f"), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object"})},
				}}},
				ToolChoice: &types.ToolChoiceMemberAny{},
			}
		},
	}, {
		name: "tool_choice none leaves the tools out",
		body: `{` + user + `,"tools":[{"name":"f"}],"tool_choice":{"type":"none"}}`,
	}, {
		name: "output_config.format is Converse's textFormat",
		body: `{` + user + `,"output_config":{"format":{"type":"json_schema","schema":{ "type" : "object" }},"effort":"low"}}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.OutputConfig = &types.OutputConfig{TextFormat: &types.OutputFormat{
				Type: types.OutputFormatTypeJsonSchema,
				Structure: &types.OutputFormatStructureMemberJsonSchema{Value: types.JsonSchemaDefinition{
					Schema: aws.String(`{"type":"object"}`),
				}},
			}}
		},
		wantDropped: []string{"output_config.effort"},
	}, {
		name:        "hints in body order, thinking disabled and nulls not named",
		body:        `{"service_tier":"auto","thinking":{"type":"disabled"},"mcp_servers":[],` + user + `,"container":"c","stream":true,"top_k":null,"speed":"fast","metadata":null}`,
		wantDropped: []string{"service_tier", "mcp_servers", "container", "speed"},
	}, {
		name: "thinking with a budget is a hint",
		body: `{"thinking":{"type":"enabled","budget_tokens":8000},` + user + `,"messages":[{"role":"user","content":"Hi","extra":1}]}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.Messages = converseUser("Hi")
		},
		wantDropped: []string{"thinking", "messages[].extra"},
	}, {
		name: "server tools are hints, named by type less the date",
		body: `{` + user + `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5},{"name":"f","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"}]}`,
		want: func(in *bedrockruntime.ConverseStreamInput) {
			in.ToolConfig = &types.ToolConfiguration{Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
				Name: aws.String("f"), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object"})}}}}}
		},
		wantDropped: []string{"tools[web_search]", "tools[bash]"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, dropped, err := ToConverse("", []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			want := &bedrockruntime.ConverseStreamInput{ModelId: aws.String(""), Messages: converseUser("Hi")}
			if strings.Contains(tt.body, "body-model") {
				want.ModelId = aws.String("body-model")
			}
			if tt.want != nil {
				tt.want(want)
			}
			if diff := cmp.Diff(want, in, sdkOpts); diff != "" {
				t.Errorf("input (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDropped, dropped); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToConverseRefused(t *testing.T) {
	in := func(blocks string) string { return `{"messages":[{"role":"user","content":[` + blocks + `]}]}` }
	user := `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct{ body, msg string }{
		{`[]`, "the request body is not a JSON object"},
		{`{}`, "messages must contain at least one user or assistant message"},
		{`{"messages":[{"role":"system","content":"s"}]}`, "messages must contain at least one user or assistant message"},
		{`{"messages":[{"role":"assistant","content":"a"},{"role":"user","content":"b"}]}`, "messages must start with a user message on Bedrock Converse"},
		{`{"messages":[{"role":"tool","content":"a"}]}`, `messages[0].role "tool" is not supported on Bedrock Converse`},
		{`{"messages":{}}`, "messages must be an array"},
		{`{"messages":[{"role":"user","content":7}]}`, "messages[0].content must be a string or an array of content blocks"},
		{in(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="}}`),
			`messages[0].content[0].source.type "base64" is not supported on Bedrock Converse`},
		{in(`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`),
			`messages[0].content[0].source.type "url" is not supported on Bedrock Converse, which cannot fetch an image; send it as base64`},
		{in(`{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"Qk0="}}`),
			`messages[0].content[0].source.media_type "image/bmp" is not supported on Bedrock Converse (image/png, image/jpeg, image/gif, image/webp)`},
		{in(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"%%"}}`), "messages[0].content[0].source.data must be base64"},
		{in(`{"type":"search_result","source":"s","title":"t","content":[]}`), `messages[0].content[0].type "search_result" is not supported on Bedrock Converse`},
		{in(`{"type":"server_tool_use","id":"s","name":"web_search","input":{}}`), `messages[0].content[0].type "server_tool_use" is not supported on Bedrock Converse`},
		{in(`{"type":"tool_result","content":"x"}`), "messages[0].content[0].tool_use_id is required"},
		{in(`{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"text","data":"d"}}]}`),
			`messages[0].content[0].content[0].type "document" is not supported on Bedrock Converse`},
		{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`,
			"messages[1].content[0].input must be a JSON object"},
		{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"redacted_thinking","data":"not base64!"}]}]}`,
			"messages[1].content[0].data must be base64"},
		{`{"system":[{"type":"image"}],` + user + `}`, `system[0].type "image" is not supported on Bedrock Converse`},
		{`{` + user + `,"tools":[{"description":"no name"}]}`, "tools[0].name is required"},
		{`{` + user + `,"tools":[{"name":"f","input_schema":"x"}]}`, "tools[0].input_schema must be a JSON object"},
		{`{` + user + `,"tool_choice":{"type":"sometimes"}}`, `tool_choice.type "sometimes" is not supported on Bedrock Converse`},
		{`{` + user + `,"tool_choice":{"type":"tool"}}`, "tool_choice.name is required"},
		{`{` + user + `,"tool_choice":"auto"}`, "tool_choice must be an object"},
		{`{` + user + `,"output_config":{"format":{"type":"regex"}}}`, `output_config.format.type "regex" is not supported on Bedrock Converse`},
		{`{` + user + `,"output_config":{"format":{"type":"json_schema"}}}`, "output_config.format.schema must be a JSON object"},
		{`{` + user + `,"max_tokens":0}`, "max_tokens must be an integer from 1 to 2147483647"},
		{`{` + user + `,"temperature":"hot"}`, "temperature must be a number"},
		{`{` + user + `,"stop_sequences":"END"}`, "stop_sequences must be an array of strings"},
		{`{` + user + `,"stop_sequences":["a",2]}`, "stop_sequences must be an array of strings"},
		{`{` + user + `,"max_tokens":"5"}`, "max_tokens must be an integer from 1 to 2147483647"},
		{`{` + user + `,"max_tokens":1.5}`, "max_tokens must be an integer from 1 to 2147483647"},
		{`{"messages":["hi"]}`, "messages[0] must be an object"},
		{`{"system":1,` + user + `}`, "system must be a string or an array of text blocks"},
		{`{"system":[1],` + user + `}`, "system[0] must be a text block"},
		{`{"system":[{"type":"text","text":2}],` + user + `}`, "system[0].text must be a string"},
		{`{"messages":[{"role":"system","content":1},{"role":"user","content":"q"}]}`, "messages[0].content must be a string or an array of text blocks"},
		{`{"messages":[{"role":"system","content":[1]},{"role":"user","content":"q"}]}`, "messages[0].content[0] must be a text block"},
		{in(`1`), "messages[0].content[0] must be a content block object"},
		{in(`{"type":"text","text":2}`), "messages[0].content[0].text must be a string"},
		{in(`{"type":"image","source":"s"}`), "messages[0].content[0].source must be an object"},
		{in(`{"type":"image","source":1}`), "messages[0].content[0].source must be an object"},
		{in(`{"type":"tool_result","tool_use_id":"t","content":1}`), "messages[0].content[0].content must be a string or an array of content blocks"},
		{in(`{"type":"tool_result","tool_use_id":"t","content":[1]}`), "messages[0].content[0].content[0] must be a content block object"},
		{`{` + user + `,"tools":{}}`, "tools must be an array"},
		{`{` + user + `,"tools":[1]}`, "tools[0] must be a tool object"},
		{`{` + user + `,"output_config":"x"}`, "output_config must be an object"},
		{`{` + user + `,"output_config":{"format":"x"}}`, "output_config.format must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			in, dropped, err := ToConverse("m", []byte(tt.body))
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err %v, want a *llm.ProviderError", err)
			}
			if pe.Class != llm.FailRejected || pe.Message != tt.msg {
				t.Errorf("class %v, message %q; want %v, %q", pe.Class, pe.Message, llm.FailRejected, tt.msg)
			}
			if in != nil || dropped != nil {
				t.Errorf("an input or dropped fields with the error")
			}
		})
	}
}

func FuzzToConverse(f *testing.F) {
	for _, seed := range []string{
		claudeCodeRequest,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x","cache_control":{}}]}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"d"}}]}],"output_config":{"format":{"type":"json_schema","schema":{}}}}`,
		`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"":1}}]}]}`,
		`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"f","cache_control":{"type":"ephemeral"}}],"tool_choice":{"type":"none"}}`,
		`{}`, `null`, `[]`, `{"messages":null}`, `{"messages":[{"role":"user","content":"a"}],"messages":[]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, _, err := ToConverse("m", body)
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
		if in == nil || aws.ToString(in.ModelId) != "m" || len(in.Messages) == 0 || in.Messages[0].Role != types.ConversationRoleUser {
			t.Fatalf("input %+v without its model, or not starting with a user turn", in)
		}
		for i, m := range in.Messages {
			if len(m.Content) == 0 || i > 0 && in.Messages[i-1].Role == m.Role {
				t.Fatalf("messages[%d] empty or of its predecessor's role", i)
			}
			if _, ok := m.Content[0].(*types.ContentBlockMemberCachePoint); ok {
				t.Fatalf("messages[%d] starts with a cache point", i)
			}
		}
	})
}

// Converse stream events, for the encoder's tests.

func converseReasoning(i int32, r types.ReasoningContentBlockDelta) types.ConverseStreamOutput {
	return converseBlockDelta(i, &types.ContentBlockDeltaMemberReasoningContent{Value: r})
}

func converseMessageStop(r types.StopReason) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: r}}
}

func converseMetadata(input, output, read, write int32) types.ConverseStreamOutput {
	return &types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: &types.TokenUsage{
		InputTokens: aws.Int32(input), OutputTokens: aws.Int32(output),
		CacheReadInputTokens: aws.Int32(read), CacheWriteInputTokens: aws.Int32(write),
		TotalTokens: aws.Int32(input + output + read + write),
	}}}
}

var converseMessageStart types.ConverseStreamOutput = &types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}}

// encodeConverse encodes events, then end's, checking that each event's
// Name is its data's type.
func encodeConverse(t *testing.T, events ...types.ConverseStreamOutput) []llm.Chunk {
	t.Helper()
	e := NewConverseEncoder("msg_1", "nova-pro")
	var out []llm.Chunk
	for _, ev := range events {
		evs, err := e.Encode(ev)
		if err != nil {
			t.Fatalf("encode %T: %v", ev, err)
		}
		out = append(out, evs...)
	}
	out = append(out, e.End()...)
	if more := e.End(); more != nil {
		t.Errorf("end a second time: %d events", len(more))
	}
	for i, ev := range out {
		var typ struct{ Type string }
		if err := json.Unmarshal(ev.Raw, &typ); err != nil || typ.Type != ev.Event {
			t.Errorf("event %d %s: type %q, err %v", i, ev.Event, typ.Type, err)
		}
	}
	return out
}

// converseView is what a test checks of an event.
type converseView struct {
	Name, Data string
	Output     bool
	Text       string
	Finished   bool
}

func converseViews(evs []llm.Chunk) []converseView {
	var out []converseView
	for _, ev := range evs {
		out = append(out, converseView{ev.Event, string(ev.Raw), ev.Output, ev.Text, ev.Finished == 1 && ev.Seen == 1})
	}
	return out
}

func TestConverseEncoderStream(t *testing.T) {
	evs := encodeConverse(t,
		converseMessageStart,
		converseReasoning(0, &types.ReasoningContentBlockDeltaMemberText{Value: "Let me "}),
		converseReasoning(0, &types.ReasoningContentBlockDeltaMemberText{Value: "think."}),
		converseReasoning(0, &types.ReasoningContentBlockDeltaMemberSignature{Value: "sig"}),
		converseBlockStop(0),
		converseTextDelta(1, "Hello <b>"),
		converseTextDelta(1, ""),
		converseBlockStop(1),
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{
			ContentBlockIndex: aws.Int32(2),
			Start:             &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String("tooluse_1"), Name: aws.String("get_weather")}},
		}},
		converseInputDelta(2, `{"city":`),
		converseInputDelta(2, `"Paris"}`),
		converseBlockStop(2),
		converseMessageStop(types.StopReasonToolUse),
		converseMetadata(12, 34, 9000, 100),
	)
	want := []converseView{
		{Name: "message_start", Data: `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"nova-pro","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`},
		{Name: "content_block_start", Data: `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
		{Name: "content_block_delta", Data: `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}`, Output: true, Text: "Let me "},
		{Name: "content_block_delta", Data: `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think."}}`, Output: true, Text: "think."},
		{Name: "content_block_delta", Data: `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`},
		{Name: "content_block_stop", Data: `{"type":"content_block_stop","index":0}`},
		{Name: "content_block_start", Data: `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
		{Name: "content_block_delta", Data: `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello <b>"}}`, Output: true, Text: "Hello <b>"},
		{Name: "content_block_stop", Data: `{"type":"content_block_stop","index":1}`},
		{Name: "content_block_start", Data: `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tooluse_1","name":"get_weather","input":{}}}`, Output: true, Text: "get_weather"},
		{Name: "content_block_delta", Data: `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`, Output: true, Text: `{"city":`},
		{Name: "content_block_delta", Data: `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`, Output: true, Text: `"Paris"}`},
		{Name: "content_block_stop", Data: `{"type":"content_block_stop","index":2}`},
		{Name: "message_delta", Data: `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":9000,"output_tokens":34}}`, Finished: true},
		{Name: "message_stop", Data: `{"type":"message_stop"}`},
	}
	if diff := cmp.Diff(want, converseViews(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}

	// The usage the gateway bills from.
	for i, ev := range evs {
		if (ev.Usage != nil) != (ev.Event == EventMessageDelta) {
			t.Errorf("event %d %s: usage %+v", i, ev.Event, ev.Usage)
		}
	}
	u := evs[13].Usage
	if u == nil {
		t.Fatal("message_delta without usage")
	}
	uncached, read, write := u.PromptParts()
	if u.PromptTokens != 9112 || u.CompletionTokens != 34 || u.TotalTokens != 9146 || uncached != 12 || read != 9000 || write != 100 {
		t.Errorf("usage %+v, parts %d %d %d; want 9112 prompt (12, 9000 read, 100 written), 34 completion", u, uncached, read, write)
	}

	// What the gateway reads of the events passed through is what the
	// encoder says of them.
	var obs Observer
	for i, ev := range evs {
		c, err := obs.Observe(ev.Event, ev.Raw)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if c.Output != ev.Output || c.Text != ev.Text || c.Seen != ev.Seen || c.Finished != ev.Finished {
			t.Errorf("event %d %s: observed output %v text %q seen %b finished %b; encoder says %v %q %b %b", i, ev.Event, c.Output, c.Text, c.Seen, c.Finished, ev.Output, ev.Text, ev.Seen, ev.Finished)
		}
		if ev.Event == EventMessageDelta && !reflect.DeepEqual(c.Usage, ev.Usage) {
			t.Errorf("observed usage %+v, encoder's %+v", c.Usage, ev.Usage)
		}
	}
	if !obs.Done() {
		t.Error("the observer did not see message_stop")
	}

	// A client SDK's accumulation of the stream: blocks by index.
	got := accumulateConverse(t, evs)
	wantMsg := `{"id":"msg_1","type":"message","role":"assistant","model":"nova-pro","content":[` +
		`{"type":"thinking","thinking":"Let me think.","signature":"sig"},{"type":"text","text":"Hello <b>"},` +
		`{"type":"tool_use","id":"tooluse_1","name":"get_weather","input":{"city":"Paris"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":9000,"output_tokens":34}}`
	if got != wantMsg {
		t.Errorf("accumulated message\n got %s\nwant %s", got, wantMsg)
	}
}

// accumulateConverse builds the message a client SDK makes of a stream, as
// Anthropic's SDKs do: content blocks appended at their start, found by
// index, tool input parsed at the block's stop.
func accumulateConverse(t *testing.T, evs []llm.Chunk) string {
	t.Helper()
	var msg Message
	partial := map[int]string{}
	for _, ev := range evs {
		var raw RawEvent
		if err := json.Unmarshal(ev.Raw, &raw); err != nil {
			t.Fatal(err)
		}
		switch ev.Event {
		case EventMessageStart:
			if err := json.Unmarshal(raw.Message, &msg); err != nil {
				t.Fatal(err)
			}
		case EventContentBlockStart:
			var b ContentBlock
			if err := json.Unmarshal(raw.ContentBlock, &b); err != nil {
				t.Fatal(err)
			}
			if raw.Index != len(msg.Content) {
				t.Fatalf("block %d started as the message's block %d", raw.Index, len(msg.Content))
			}
			msg.Content = append(msg.Content, b)
		case EventContentBlockDelta:
			var d Delta
			if err := json.Unmarshal(raw.Delta, &d); err != nil {
				t.Fatal(err)
			}
			if raw.Index >= len(msg.Content) {
				t.Fatalf("a delta of block %d, not started", raw.Index)
			}
			b := &msg.Content[raw.Index]
			cat := func(dst **string, s *string) {
				if s == nil || *dst == nil {
					t.Fatalf("delta %s of block %s", d.Type, b.Type)
				}
				v := **dst + *s
				*dst = &v
			}
			switch d.Type {
			case DeltaText:
				cat(&b.Text, d.Text)
			case DeltaThinking:
				cat(&b.Thinking, d.Thinking)
			case DeltaSignature:
				cat(&b.Signature, d.Signature)
			case DeltaInputJSON:
				partial[raw.Index] += *d.PartialJSON
			}
		case EventContentBlockStop:
			if s, ok := partial[raw.Index]; ok {
				msg.Content[raw.Index].Input = json.RawMessage(s)
			}
		case EventMessageDelta:
			var md MessageDelta
			if err := json.Unmarshal(ev.Raw, &md); err != nil {
				t.Fatal(err)
			}
			msg.StopReason, msg.StopSequence, msg.Usage = md.Delta.StopReason, md.Delta.StopSequence, md.Usage
		}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestConverseEncoderEnd(t *testing.T) {
	noUsage := []converseView{
		{Name: "message_delta", Data: `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":0}}`, Finished: true},
		{Name: "message_stop", Data: `{"type":"message_stop"}`},
	}
	withUsage := []converseView{
		{Name: "message_delta", Data: `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}`, Finished: true},
		{Name: "message_stop", Data: `{"type":"message_stop"}`},
	}
	tests := []struct {
		name   string
		events []types.ConverseStreamOutput
		want   []converseView // after message_start and the text block
		usage  string
	}{
		{"metadata", []types.ConverseStreamOutput{converseMessageStop(types.StopReasonEndTurn), converseMetadata(5, 2, 0, 0)}, withUsage,
			`{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}`},
		{"metadata first", []types.ConverseStreamOutput{converseMetadata(5, 2, 0, 0), converseMessageStop(types.StopReasonEndTurn)}, withUsage,
			`{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}`},
		{"no metadata", []types.ConverseStreamOutput{converseMessageStop(types.StopReasonEndTurn)}, noUsage, ""},
		{"metadata without usage", []types.ConverseStreamOutput{converseMessageStop(types.StopReasonEndTurn), &types.ConverseStreamOutputMemberMetadata{}}, noUsage, ""},
		{"cut before messageStop", []types.ConverseStreamOutput{converseMetadata(5, 2, 0, 0)}, nil, ""},
		{"cut", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The text block is still open at messageStop: it is stopped then.
			evs := encodeConverse(t, append([]types.ConverseStreamOutput{converseMessageStart, converseTextDelta(0, "Hi")}, tt.events...)...)
			want := []converseView{
				{Name: "content_block_start", Data: `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
				{Name: "content_block_delta", Data: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, Output: true, Text: "Hi"},
			}
			if tt.want != nil {
				want = append(want, converseView{Name: "content_block_stop", Data: `{"type":"content_block_stop","index":0}`})
			}
			want = append(want, tt.want...)
			if diff := cmp.Diff(want, converseViews(evs[1:])); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if last := evs[len(evs)-1]; tt.want != nil && !reflect.DeepEqual(evs[len(evs)-2].Usage, llm.ReadUsage([]byte(tt.usage))) {
				t.Errorf("%s usage %+v, want %s", last.Event, evs[len(evs)-2].Usage, tt.usage)
			}
		})
	}
}

func TestConverseEncoderStopReasons(t *testing.T) {
	tests := []struct {
		reason   types.StopReason
		fields   document.Interface
		want     string
		sequence string
	}{
		{types.StopReasonEndTurn, nil, "end_turn", ""},
		{types.StopReasonToolUse, nil, "tool_use", ""},
		{types.StopReasonMaxTokens, nil, "max_tokens", ""},
		{types.StopReasonStopSequence, nil, "stop_sequence", ""},
		{types.StopReasonStopSequence, document.NewLazyDocument(map[string]any{"stop_sequence": "END"}), "stop_sequence", "END"},
		{types.StopReasonEndTurn, document.NewLazyDocument(map[string]any{"stop_sequence": "END"}), "end_turn", ""},
		{types.StopReasonGuardrailIntervened, nil, "refusal", ""},
		{types.StopReasonContentFiltered, nil, "refusal", ""},
		{types.StopReasonModelContextWindowExceeded, nil, "model_context_window_exceeded", ""},
		{types.StopReason("something_new"), nil, "end_turn", ""},
		{types.StopReason(""), document.NewLazyDocument([]any{1}), "end_turn", ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason)+tt.sequence, func(t *testing.T) {
			evs := encodeConverse(t, &types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: tt.reason, AdditionalModelResponseFields: tt.fields}})
			if len(evs) != 3 || evs[1].Event != EventMessageDelta || evs[1].Finished != 1 {
				t.Fatalf("events %+v, want message_start, message_delta %s, message_stop", converseViews(evs), tt.want)
			}
			var md Event
			if err := json.Unmarshal(evs[1].Raw, &md); err != nil {
				t.Fatal(err)
			}
			if seq := aws.ToString(md.Delta.StopSequence); md.Delta.StopReason != tt.want || seq != tt.sequence {
				t.Errorf("stop_reason %q, stop_sequence %q; want %q, %q", md.Delta.StopReason, seq, tt.want, tt.sequence)
			}
		})
	}
}

func TestConverseEncoderBlocks(t *testing.T) {
	evs := encodeConverse(t,
		// No messageStart: message_start comes with the first content.
		converseReasoning(0, &types.ReasoningContentBlockDeltaMemberRedactedContent{Value: []byte("ab")}),
		converseReasoning(0, &types.ReasoningContentBlockDeltaMemberRedactedContent{Value: []byte("cd")}),
		converseBlockStop(0),
		converseReasoning(1, &types.ReasoningContentBlockDeltaMemberSignature{Value: "s"}),
		converseTextDelta(1, "after"), // a kind change within one Converse block
		converseInputDelta(1, `{}`),   // no tool started: nothing
		converseTextDelta(3, "gap"),   // Converse numbering with a gap
		converseReasoning(4, &types.ReasoningContentBlockDeltaMemberRedactedContent{Value: []byte("x")}),
		converseMessageStop(types.StopReasonEndTurn),
		converseTextDelta(5, "late"), // after messageStop: nothing
		converseMetadata(1, 1, 0, 0),
		converseMetadata(9, 9, 0, 0), // after message_stop: nothing
	)
	var names []string
	for _, ev := range evs {
		names = append(names, ev.Event)
	}
	wantNames := []string{
		"message_start",
		"content_block_start", "content_block_stop", // redacted 0
		"content_block_start", "content_block_delta", "content_block_stop", // thinking 1 (signature only)
		"content_block_start", "content_block_delta", // text 2
		"content_block_stop",                         // text 2, closed by the next block
		"content_block_start", "content_block_delta", // text 3 ("gap")
		"content_block_stop",                        // text 3, at messageStop
		"content_block_start", "content_block_stop", // redacted 4, at messageStop
		"message_delta", "message_stop",
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Fatalf("event names (-want +got):\n%s", diff)
	}
	if got, want := string(evs[1].Raw), `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"YWJjZA=="}}`; got != want || !evs[1].Output {
		t.Errorf("redacted start %s (output %v), want %s", got, evs[1].Output, want)
	}
	if got, want := string(evs[12].Raw), `{"type":"content_block_start","index":4,"content_block":{"type":"redacted_thinking","data":"eA=="}}`; got != want {
		t.Errorf("second redacted start %s, want %s", got, want)
	}
	// The message a client accumulates has its blocks in order.
	if got := accumulateConverse(t, evs); !strings.Contains(got, `"content":[{"type":"redacted_thinking","data":"YWJjZA=="},{"type":"thinking","thinking":"","signature":"s"},{"type":"text","text":"after"},{"type":"text","text":"gap"},{"type":"redacted_thinking","data":"eA=="}]`) {
		t.Errorf("accumulated %s", got)
	}
}

func TestConverseEncoderExceptions(t *testing.T) {
	tests := []struct {
		tag, value string
		msg        string
	}{
		{"throttlingException", `{"message":"Too many requests"}`, "Too many requests"},
		{"validationException", `{"Message":"Bad input"}`, "Bad input"},
		{"modelStreamErrorException", `not json`, ""},
		{"internalServerException", `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.tag, func(t *testing.T) {
			e := NewConverseEncoder("msg_1", "m")
			if _, err := e.Encode(converseTextDelta(0, "partial")); err != nil {
				t.Fatal(err)
			}
			evs, err := e.Encode(&types.UnknownUnionMember{Tag: tt.tag, Value: []byte(tt.value)})
			var ex *converse.Exception
			if len(evs) != 0 || !errors.As(err, &ex) {
				t.Fatalf("events %d, err %v; want a *converse.Exception", len(evs), err)
			}
			if ex.Name != tt.tag || ex.Message != tt.msg {
				t.Errorf("exception %q, message %q; want %q, %q", ex.Name, ex.Message, tt.tag, tt.msg)
			}
			if evs := e.End(); evs != nil {
				t.Errorf("end after an exception: %d events", len(evs))
			}
		})
	}
	e := NewConverseEncoder("msg_1", "m")
	if evs, err := e.Encode(&types.UnknownUnionMember{Tag: "somethingNew", Value: []byte(`{}`)}); len(evs) != 0 || err != nil {
		t.Errorf("an unknown member: events %d, err %v; want nothing", len(evs), err)
	}
}

// TestConverseEncoderNil encodes events with nothing in them: every nil
// pointer of the SDK's types, and members of no kind the encoder reads.
func TestConverseEncoderNil(t *testing.T) {
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
		converseBlockDelta(0, (*types.ContentBlockDeltaMemberText)(nil)),
		converseBlockDelta(0, (*types.ContentBlockDeltaMemberToolUse)(nil)),
		converseBlockDelta(0, &types.ContentBlockDeltaMemberToolUse{}),
		converseBlockDelta(0, (*types.ContentBlockDeltaMemberReasoningContent)(nil)),
		converseBlockDelta(0, &types.ContentBlockDeltaMemberReasoningContent{}),
		converseReasoning(0, (*types.ReasoningContentBlockDeltaMemberText)(nil)),
		converseReasoning(0, (*types.ReasoningContentBlockDeltaMemberSignature)(nil)),
		converseReasoning(0, (*types.ReasoningContentBlockDeltaMemberRedactedContent)(nil)),
		converseReasoning(0, &types.ReasoningContentBlockDeltaMemberRedactedContent{}),
		converseBlockDelta(0, &types.ContentBlockDeltaMemberCitation{}),
		converseBlockDelta(0, &types.ContentBlockDeltaMemberImage{}),
		converseBlockDelta(0, &types.ContentBlockDeltaMemberToolResult{}),
		&types.ConverseStreamOutputMemberContentBlockStop{},
		&types.ConverseStreamOutputMemberMetadata{},
		&types.ConverseStreamOutputMemberMessageStop{},
		&types.ConverseStreamOutputMemberMessageStop{},
	}
	evs := encodeConverse(t, events...)
	var names []string
	for _, ev := range evs {
		names = append(names, ev.Event)
	}
	// The metadata without usage came first: messageStop ends the message.
	if diff := cmp.Diff([]string{"message_start", "message_delta", "message_stop"}, names); diff != "" {
		t.Errorf("event names (-want +got):\n%s", diff)
	}
}

// TestToConverseDuplicates: of a name given twice, the last
// value is read; a null last value is an absent member.
func TestToConverseDuplicates(t *testing.T) {
	for _, body := range []string{
		`{"max_tokens":5,"max_tokens":null,"thinking":{},"thinking":null,"tool_choice":{"type":"x"},"tool_choice":null,"output_config":{},"output_config":null,"temperature":1,"temperature":null,"messages":[{"role":"user","content":"Hi"}]}`,
	} {
		in, dropped, err := ToConverse("m", []byte(body))
		if err != nil || in.InferenceConfig != nil || in.ToolConfig != nil || dropped != nil {
			t.Errorf("%s: %+v, %v, %v", body, in, dropped, err)
		}
	}
}

// BenchmarkToConverse is the translation of a coding agent's
// Messages turn of 10 KB and of 1 MB (many turns of long text with
// escapes, non-ASCII, tool uses and tool results) into a ConverseStream
// input.
func BenchmarkToConverse(b *testing.B) {
	text := strings.Repeat(`Résumé of \"main.go\":\n\tfunc main() {}\n`, 20)
	for _, size := range []int{10 << 10, 1 << 20} {
		var turns []string
		for n, i := 0, 0; n < size; i++ {
			t := fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%s"},{"type":"text","text":"%s"}]}`, i-1, text, text)
			if i == 0 {
				t = fmt.Sprintf(`{"role":"user","content":"%s"}`, text)
			} else if i%2 == 1 {
				t = fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":"%s"},{"type":"tool_use","id":"t%d","name":"read","input":{"path":"main.go"}}]}`, text, i)
			}
			turns = append(turns, t)
			n += len(t) + 1
		}
		body := []byte(`{"model":"m","max_tokens":1024,"stream":true,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"messages":[` +
			strings.Join(turns, ",") + `],"tools":[{"name":"read","input_schema":{"type":"object"}}]}`)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ToConverse("m", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestConverseStopReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "end_turn", "stop_sequence": "stop_sequence", "max_tokens": "max_tokens", "tool_use": "tool_use",
		"model_context_window_exceeded": "model_context_window_exceeded",
		"guardrail_intervened":          "refusal", "content_filtered": "refusal",
		"malformed_model_output": "end_turn", "malformed_tool_use": "end_turn", "new_reason": "end_turn",
	} {
		if got := ConverseStopReason(in); got != want {
			t.Errorf("ConverseStopReason(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkConverseEncoder turns a typical ConverseStream answer (its
// start, a short thought, 200 pieces of text, a tool call in three pieces,
// its stop and its usage) into the Messages events a client reads.
func BenchmarkConverseEncoder(b *testing.B) {
	evs := []types.ConverseStreamOutput{
		converseMessageStart,
		converseReasoning(0, &types.ReasoningContentBlockDeltaMemberText{Value: "Let me think."}),
		converseBlockStop(0),
	}
	for range 200 {
		evs = append(evs, converseTextDelta(1, " token"))
	}
	evs = append(evs, converseBlockStop(1),
		&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{
			ContentBlockIndex: aws.Int32(2),
			Start:             &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String("tooluse_1"), Name: aws.String("get_weather")}},
		}},
		converseInputDelta(2, `{"city":`), converseInputDelta(2, `"Paris"}`), converseBlockStop(2),
		converseMessageStop(types.StopReasonToolUse),
		&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: &types.TokenUsage{
			InputTokens: aws.Int32(100), OutputTokens: aws.Int32(220), TotalTokens: aws.Int32(320)}}})
	b.ReportAllocs()
	for b.Loop() {
		e := NewConverseEncoder("msg_1", "m")
		for _, ev := range evs {
			if _, err := e.Encode(ev); err != nil {
				b.Fatal(err)
			}
		}
		e.End()
	}
}
