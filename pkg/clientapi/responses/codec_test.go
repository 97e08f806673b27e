package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/responses"

	"github.com/buzzgate/buzzgate/pkg/clientapi/clientapitest"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// responsesAnswer starts a real router.Answer from a provider that sends
// raws then end, at prices 1 and 2 USD per million tokens, for a chat
// request with body's extra fields (a Responses request as converted).
func responsesAnswer(t *testing.T, stream bool, extra string, end error, raws ...string) (*router.Answer, *responsesCodec) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"x"}]%s}`, stream, extra)
	ans, chat := clientapitest.ScriptedAnswer(t, body, end, raws...)
	return ans, &responsesCodec{requestID: "req_0123abcd", req: chat, head: responseswire.Head{RequestID: "req_0123abcd", Model: "gpt-x", CreatedAt: 1700000000}}
}

// turnRecorder records the turn a codec keeps, and whether Price came
// first.
type turnRecorder struct {
	out    *clientapitest.RecordingEmitter
	calls  int
	output []string
	usage  llm.Usage
	after  int // the emitter's event count when the turn was kept
}

func (r *turnRecorder) keepTurn(_ string, _ json.RawMessage, output []json.RawMessage, usage llm.Usage) {
	r.calls++
	r.usage = usage
	r.after = len(r.out.Events)
	if r.out.Priced != 1 {
		panic("turn kept before Price")
	}
	for _, m := range output {
		r.output = append(r.output, string(m))
	}
}

// turnFunc is a turn keeper that is a function.
type turnFunc func(json.RawMessage, []json.RawMessage, llm.Usage)

func (f turnFunc) keepTurn(_ string, response json.RawMessage, output []json.RawMessage, usage llm.Usage) {
	f(response, output, usage)
}

const respUsageJSON = `{"input_tokens":3,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":8,"cost":0.000013}`

// respObject is the Response with the default settings and the request's
// echoes empty.
func respObject(status, output, usage, tail string) string {
	return `{"id":"resp_0123abcd","object":"response","created_at":1700000000,"status":"` + status + `",` + tail +
		`"instructions":null,"max_output_tokens":null,"model":"up-model","output":` + output +
		`,"parallel_tool_calls":true,"previous_response_id":null,"temperature":1,"tool_choice":"auto","tools":[],"top_p":1,"usage":` + usage + `,"metadata":{}}`
}

const (
	okTail   = `"error":null,"incomplete_details":null,`
	msgText  = `{"id":"msg_0123abcd_0","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello"}],"role":"assistant"}`
	toolsOut = `[{"id":"msg_0123abcd_0","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Let me look."}],"role":"assistant"},` +
		`{"id":"fc_0123abcd_1","type":"function_call","status":"completed","arguments":"{\"city\": \"Paris\"}","call_id":"call_1","name":"weather"},` +
		`{"id":"fc_0123abcd_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_2","name":"time"}]`
	toolsTurn = `{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"time","arguments":"{}"}}]}`
)

func TestResponsesNonStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		raws []string
		end  error
		want string
		turn string
		err  error
	}{
		{"text", []string{clientapitest.Chunk(`{"role":"assistant","content":"Hel"}`, ""), clientapitest.Chunk(`{"content":"lo"}`, "stop"), clientapitest.UsageChunk}, nil,
			respObject("completed", `[`+msgText+`]`, respUsageJSON, okTail),
			`{"role":"assistant","content":"Hello"}`, nil},
		{"tool call", clientapitest.ToolChunks, nil,
			respObject("completed", toolsOut, respUsageJSON, okTail), toolsTurn, nil},
		{"refusal", []string{clientapitest.Chunk(`{"role":"assistant","refusal":"I can't help with that."}`, "stop"), clientapitest.UsageChunk}, nil,
			respObject("completed", `[{"id":"msg_0123abcd_0","type":"message","status":"completed","content":[{"type":"refusal","refusal":"I can't help with that."}],"role":"assistant"}]`, respUsageJSON, okTail),
			`{"role":"assistant","content":null,"refusal":"I can't help with that."}`, nil},
		{"length", []string{clientapitest.Chunk(`{"content":"Once upon"}`, "length"), clientapitest.UsageChunk}, nil,
			respObject("incomplete", `[{"id":"msg_0123abcd_0","type":"message","status":"incomplete","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Once upon"}],"role":"assistant"}]`, respUsageJSON,
				`"error":null,"incomplete_details":{"reason":"max_output_tokens"},`),
			`{"role":"assistant","content":"Once upon"}`, nil},
		{"content filter", []string{clientapitest.Chunk(`{"content":"Partial"}`, "content_filter"), clientapitest.UsageChunk}, nil,
			respObject("incomplete", `[{"id":"msg_0123abcd_0","type":"message","status":"incomplete","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Partial"}],"role":"assistant"}]`, respUsageJSON,
				`"error":null,"incomplete_details":{"reason":"content_filter"},`),
			`{"role":"assistant","content":"Partial"}`, nil},
		{"incomplete", []string{clientapitest.Chunk(`{"content":"Once upon"}`, ""), clientapitest.UsageChunk, clientapitest.Chunk(`{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":"}}]}`, "")}, llm.ErrStreamCut,
			respObject("incomplete", `[{"id":"msg_0123abcd_0","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Once upon"}],"role":"assistant"},`+
				`{"id":"fc_0123abcd_1","type":"function_call","status":"incomplete","arguments":"{\"a\":","call_id":"call_0123abcd_1","name":"f"}]`, respUsageJSON,
				`"error":null,"incomplete_details":{"reason":"interrupted"},`),
			`{"role":"assistant","content":"Once upon","tool_calls":[{"id":"call_0123abcd_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`, router.ErrIncomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans, c := responsesAnswer(t, false, "", tc.end, tc.raws...)
			var out clientapitest.RecordingEmitter
			tr := &turnRecorder{out: &out}
			c.turn = tr
			res := c.Answer(ans, &out)
			if !errors.Is(res.Err, tc.err) || !res.Answered {
				t.Fatalf("result %+v, want err %v", res, tc.err)
			}
			if diff := cmp.Diff(tc.want+"\n", string(out.Whole)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			wantHead := map[string]string{"Content-Type": "application/json", "X-Request-Id": "req_0123abcd",
				"X-Gateway-Model": "m", "X-Gateway-Provider": "p", "X-Gateway-Route-Depth": "0"}
			if diff := cmp.Diff(wantHead, out.Head); diff != "" || out.Status != 200 || out.Streamed {
				t.Errorf("status %d stream %v header (-want +got):\n%s", out.Status, out.Streamed, diff)
			}
			if out.Priced != 1 || out.Usage.Cost != 0.000013 {
				t.Errorf("priced %d times at %v", out.Priced, out.Usage.Cost)
			}
			if diff := cmp.Diff([]string{tc.turn}, tr.output); diff != "" || tr.calls != 1 || tr.usage.Cost != 0.000013 {
				t.Errorf("turn kept %d times, usage %+v, output (-want +got):\n%s", tr.calls, tr.usage, diff)
			}
		})
	}
}

// TestResponsesEchoes: the request's settings and the Responses-only fields
// come back in the Response, tools and tool_choice in the Responses shape.
func TestResponsesEchoes(t *testing.T) {
	extra := `,"tools":[{"type":"function","function":{"name":"weather","description":"Weather now","parameters":{"type":"object"},"strict":true}}],` +
		`"tool_choice":{"type":"function","function":{"name":"weather"}},"temperature":0.5,"top_p":0.9,"parallel_tool_calls":false,"max_tokens":100`
	ans, c := responsesAnswer(t, false, extra, nil, clientapitest.Chunk(`{"content":"Hello"}`, "stop"), clientapitest.UsageChunk)
	c.head.Metadata = json.RawMessage(`{"k":"v"}`)
	c.head.Instructions = "Be brief."
	c.head.PreviousID = "resp_feed"
	var out clientapitest.RecordingEmitter
	if res := c.Answer(ans, &out); res.Err != nil {
		t.Fatal(res.Err)
	}
	want := `{"id":"resp_0123abcd","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,` +
		`"instructions":"Be brief.","max_output_tokens":100,"model":"up-model","output":[` + msgText + `],"parallel_tool_calls":false,` +
		`"previous_response_id":"resp_feed","temperature":0.5,"tool_choice":{"type":"function","name":"weather"},` +
		`"tools":[{"type":"function","name":"weather","description":"Weather now","parameters":{"type":"object"},"strict":true}],` +
		`"top_p":0.9,"usage":` + respUsageJSON + `,"metadata":{"k":"v"}}` + "\n"
	if diff := cmp.Diff(want, string(out.Whole)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// TestResponsesSDKDecodes: openai-go's Response reads the gateway's
// Response, its output text, tool calls and usage.
func TestResponsesSDKDecodes(t *testing.T) {
	ans, c := responsesAnswer(t, false, "", nil, clientapitest.ToolChunks...)
	var out clientapitest.RecordingEmitter
	c.Answer(ans, &out)
	var r responses.Response
	if err := json.Unmarshal(out.Whole, &r); err != nil {
		t.Fatal(err)
	}
	if r.ID != "resp_0123abcd" || r.Status != responses.ResponseStatusCompleted || r.OutputText() != "Let me look." || len(r.Output) != 3 {
		t.Errorf("id %q status %q text %q outputs %d", r.ID, r.Status, r.OutputText(), len(r.Output))
	}
	fc := r.Output[1].AsFunctionCall()
	if fc.CallID != "call_1" || fc.Name != "weather" || fc.Arguments != `{"city": "Paris"}` {
		t.Errorf("function call %+v", fc)
	}
	if r.Usage.InputTokens != 3 || r.Usage.OutputTokens != 5 || r.Usage.TotalTokens != 8 || r.Usage.JSON.ExtraFields["cost"].Raw() != "0.000013" {
		t.Errorf("usage %+v", r.Usage)
	}

	ans, c = responsesAnswer(t, false, "", nil, clientapitest.Chunk(`{"content":"Hello"}`, "stop"), clientapitest.UsageChunk)
	out = clientapitest.RecordingEmitter{}
	c.Answer(ans, &out)
	r = responses.Response{}
	if err := json.Unmarshal(out.Whole, &r); err != nil || r.OutputText() != "Hello" || r.Metadata == nil {
		t.Errorf("text: %v, %q, metadata %v", err, r.OutputText(), r.Metadata)
	}
}

// TestResponsesNonStreamFailure: a provider failure after output and the
// request's ceiling are errors, and nothing is written nor kept.
func TestResponsesNonStreamFailure(t *testing.T) {
	for _, tc := range []struct {
		end  error
		code llm.Code
	}{
		{&llm.ProviderError{Class: llm.FailTransient, Message: "boom"}, llm.CodeAllProvidersFailed},
		{context.DeadlineExceeded, llm.CodeRequestTimeout},
	} {
		ans, c := responsesAnswer(t, false, "", tc.end, clientapitest.Chunk(`{"content":"Hi"}`, ""))
		c.turn = turnFunc(func(json.RawMessage, []json.RawMessage, llm.Usage) { t.Error("turn kept") })
		var out clientapitest.RecordingEmitter
		res := c.Answer(ans, &out)
		if res.Answered || llm.AsError(res.Err).Code != tc.code || out.Status != 0 || out.Priced != 0 {
			t.Errorf("%v: result %+v, status %d, priced %d; want %s", tc.end, res, out.Status, out.Priced, tc.code)
		}
	}
}

// The in-progress Response of response.created and response.in_progress.
const respInProgress = `{"id":"resp_0123abcd","object":"response","created_at":1700000000,"status":"in_progress","error":null,"incomplete_details":null,` +
	`"instructions":null,"max_output_tokens":null,"model":"up-model","output":[],"parallel_tool_calls":true,"previous_response_id":null,` +
	`"temperature":1,"tool_choice":"auto","tools":[],"top_p":1,"usage":null,"metadata":{}}`

func respEv(name string, seq int, fields string) string {
	s := name + ` {"type":"` + name + `","sequence_number":` + fmt.Sprint(seq)
	if fields != "" {
		s += "," + fields
	}
	return s + "}"
}

func respStart() []string {
	return []string{
		respEv("response.created", 0, `"response":`+respInProgress),
		respEv("response.in_progress", 1, `"response":`+respInProgress),
	}
}

func TestResponsesStream(t *testing.T) {
	const (
		msgAdded  = `"output_index":0,"item":{"id":"msg_0123abcd_0","type":"message","status":"in_progress","content":[],"role":"assistant"}`
		partAdded = `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`
	)
	delta := func(s string) string {
		return `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"delta":"` + s + `","logprobs":[]`
	}
	textDone := func(s string) string {
		return `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"text":"` + s + `","logprobs":[]`
	}
	partDone := func(s string) string {
		return `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"` + s + `"}`
	}
	msgDone := func(s, status string) string {
		return `"output_index":0,"item":{"id":"msg_0123abcd_0","type":"message","status":"` + status + `","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"` + s + `"}],"role":"assistant"}`
	}
	for _, tc := range []struct {
		name string
		raws []string
		end  error
		want []string
		turn []string
		err  error
	}{
		{"text", []string{clientapitest.Chunk(`{"role":"assistant","content":""}`, ""), clientapitest.Chunk(`{"content":"Hel"}`, ""), clientapitest.Chunk(`{"content":"lo"}`, "stop"), clientapitest.UsageChunk}, nil, append(respStart(),
			respEv("response.output_item.added", 2, msgAdded),
			respEv("response.content_part.added", 3, partAdded),
			respEv("response.output_text.delta", 4, delta("Hel")),
			respEv("response.output_text.delta", 5, delta("lo")),
			respEv("response.output_text.done", 6, textDone("Hello")),
			respEv("response.content_part.done", 7, partDone("Hello")),
			respEv("response.output_item.done", 8, msgDone("Hello", "completed")),
			"PRICE",
			respEv("response.completed", 9, `"response":`+respObject("completed", `[`+msgText+`]`, respUsageJSON, okTail)),
		), []string{`{"role":"assistant","content":"Hello"}`}, nil},
		{"tool calls", clientapitest.ToolChunks, nil, append(respStart(),
			respEv("response.output_item.added", 2, msgAdded),
			respEv("response.content_part.added", 3, partAdded),
			respEv("response.output_text.delta", 4, delta("Let me look.")),
			respEv("response.output_text.done", 5, textDone("Let me look.")),
			respEv("response.content_part.done", 6, partDone("Let me look.")),
			respEv("response.output_item.done", 7, msgDone("Let me look.", "completed")),
			respEv("response.output_item.added", 8, `"output_index":1,"item":{"id":"fc_0123abcd_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"weather"}`),
			respEv("response.function_call_arguments.delta", 9, `"item_id":"fc_0123abcd_1","output_index":1,"delta":"{\"city\":"`),
			respEv("response.function_call_arguments.delta", 10, `"item_id":"fc_0123abcd_1","output_index":1,"delta":" \"Paris\"}"`),
			respEv("response.function_call_arguments.done", 11, `"item_id":"fc_0123abcd_1","output_index":1,"arguments":"{\"city\": \"Paris\"}"`),
			respEv("response.output_item.done", 12, `"output_index":1,"item":{"id":"fc_0123abcd_1","type":"function_call","status":"completed","arguments":"{\"city\": \"Paris\"}","call_id":"call_1","name":"weather"}`),
			respEv("response.output_item.added", 13, `"output_index":2,"item":{"id":"fc_0123abcd_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"time"}`),
			respEv("response.function_call_arguments.delta", 14, `"item_id":"fc_0123abcd_2","output_index":2,"delta":"{}"`),
			respEv("response.function_call_arguments.done", 15, `"item_id":"fc_0123abcd_2","output_index":2,"arguments":"{}"`),
			respEv("response.output_item.done", 16, `"output_index":2,"item":{"id":"fc_0123abcd_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_2","name":"time"}`),
			"PRICE",
			respEv("response.completed", 17, `"response":`+respObject("completed", toolsOut, respUsageJSON, okTail)),
		), []string{toolsTurn}, nil},
		{"refusal", []string{clientapitest.Chunk(`{"refusal":"No."}`, "stop"), clientapitest.UsageChunk}, nil, append(respStart(),
			respEv("response.output_item.added", 2, msgAdded),
			respEv("response.content_part.added", 3, `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"part":{"type":"refusal","refusal":""}`),
			respEv("response.refusal.delta", 4, `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"delta":"No."`),
			respEv("response.refusal.done", 5, `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"refusal":"No."`),
			respEv("response.content_part.done", 6, `"item_id":"msg_0123abcd_0","output_index":0,"content_index":0,"part":{"type":"refusal","refusal":"No."}`),
			respEv("response.output_item.done", 7, `"output_index":0,"item":{"id":"msg_0123abcd_0","type":"message","status":"completed","content":[{"type":"refusal","refusal":"No."}],"role":"assistant"}`),
			"PRICE",
			respEv("response.completed", 8, `"response":`+respObject("completed", `[{"id":"msg_0123abcd_0","type":"message","status":"completed","content":[{"type":"refusal","refusal":"No."}],"role":"assistant"}]`, respUsageJSON, okTail)),
		), []string{`{"role":"assistant","content":null,"refusal":"No."}`}, nil},
		{"length", []string{clientapitest.Chunk(`{"content":"Hi"}`, "length"), clientapitest.UsageChunk}, nil, append(respStart(),
			respEv("response.output_item.added", 2, msgAdded),
			respEv("response.content_part.added", 3, partAdded),
			respEv("response.output_text.delta", 4, delta("Hi")),
			respEv("response.output_text.done", 5, textDone("Hi")),
			respEv("response.content_part.done", 6, partDone("Hi")),
			respEv("response.output_item.done", 7, msgDone("Hi", "incomplete")),
			"PRICE",
			respEv("response.incomplete", 8, `"response":`+respObject("incomplete", `[{`+msgDone("Hi", "incomplete")[len(`"output_index":0,"item":{`):]+`]`, respUsageJSON,
				`"error":null,"incomplete_details":{"reason":"max_output_tokens"},`)),
		), []string{`{"role":"assistant","content":"Hi"}`}, nil},
		{"error after output", []string{clientapitest.Chunk(`{"content":"Hi"}`, ""), clientapitest.UsageChunk}, &llm.ProviderError{Class: llm.FailTransient, Message: "reset"}, append(respStart(),
			respEv("response.output_item.added", 2, msgAdded),
			respEv("response.content_part.added", 3, partAdded),
			respEv("response.output_text.delta", 4, delta("Hi")),
			respEv("response.output_text.done", 5, textDone("Hi")),
			respEv("response.content_part.done", 6, partDone("Hi")),
			respEv("response.output_item.done", 7, msgDone("Hi", "incomplete")),
			"PRICE",
			respEv("response.failed", 8, `"response":`+respObject("failed", `[{`+msgDone("Hi", "incomplete")[len(`"output_index":0,"item":{`):]+`]`, respUsageJSON,
				`"error":{"code":"stream_interrupted","message":"provider p failed after its answer had started; the answer is cut short"},"incomplete_details":null,`)),
		), nil, &llm.ProviderError{}},
		{"timeout in a tool call", []string{clientapitest.Chunk(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{"}}]}`, ""), clientapitest.UsageChunk}, context.DeadlineExceeded, append(respStart(),
			respEv("response.output_item.added", 2, `"output_index":0,"item":{"id":"fc_0123abcd_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"f"}`),
			respEv("response.function_call_arguments.delta", 3, `"item_id":"fc_0123abcd_0","output_index":0,"delta":"{"`),
			respEv("response.function_call_arguments.done", 4, `"item_id":"fc_0123abcd_0","output_index":0,"arguments":"{"`),
			respEv("response.output_item.done", 5, `"output_index":0,"item":{"id":"fc_0123abcd_0","type":"function_call","status":"incomplete","arguments":"{","call_id":"call_1","name":"f"}`),
			"PRICE",
			respEv("response.failed", 6, `"response":`+respObject("failed", `[{"id":"fc_0123abcd_0","type":"function_call","status":"incomplete","arguments":"{","call_id":"call_1","name":"f"}]`, respUsageJSON,
				`"error":{"code":"request_timeout","message":"the request reached its time limit; the answer is cut short"},"incomplete_details":null,`)),
		), nil, context.DeadlineExceeded},
		{"incomplete", []string{clientapitest.Chunk(`{"content":"Hi"}`, ""), clientapitest.UsageChunk}, llm.ErrStreamCut, append(respStart(),
			respEv("response.output_item.added", 2, msgAdded),
			respEv("response.content_part.added", 3, partAdded),
			respEv("response.output_text.delta", 4, delta("Hi")),
			respEv("response.output_text.done", 5, textDone("Hi")),
			respEv("response.content_part.done", 6, partDone("Hi")),
			respEv("response.output_item.done", 7, msgDone("Hi", "incomplete")),
			"PRICE",
			respEv("response.incomplete", 8, `"response":`+respObject("incomplete", `[{`+msgDone("Hi", "incomplete")[len(`"output_index":0,"item":{`):]+`]`, respUsageJSON,
				`"error":null,"incomplete_details":{"reason":"interrupted"},`)),
		), []string{`{"role":"assistant","content":"Hi"}`}, router.ErrIncomplete},
	} {
		for _, keyed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keyed=%v", tc.name, keyed), func(t *testing.T) {
				ans, c := responsesAnswer(t, true, "", tc.end, tc.raws...)
				c.keyed = keyed
				var out clientapitest.RecordingEmitter
				tr := &turnRecorder{out: &out}
				c.turn = tr
				res := c.Answer(ans, &out)
				var pe *llm.ProviderError
				if _, isPE := tc.err.(*llm.ProviderError); isPE && !errors.As(res.Err, &pe) || !isPE && !errors.Is(res.Err, tc.err) || !res.Answered {
					t.Fatalf("result %+v, want err %v", res, tc.err)
				}
				if diff := cmp.Diff(tc.want, out.Events); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if out.Status != 200 || !out.Streamed || out.Head["Content-Type"] != "text/event-stream" || out.Head["X-Gateway-Provider"] != "p" {
					t.Errorf("status %d stream %v header %v", out.Status, out.Streamed, out.Head)
				}
				if out.Priced != 1 || out.Events[len(out.Events)-2] != "PRICE" {
					t.Errorf("priced %d times, not right before the last event", out.Priced)
				}
				if diff := cmp.Diff(tc.turn, tr.output); diff != "" {
					t.Errorf("turn (-want +got):\n%s", diff)
				}
				if tc.turn != nil && tr.after != len(out.Events)-1 {
					t.Errorf("turn kept after %d events of %d", tr.after, len(out.Events))
				}
				// Every event decodes as openai-go's stream event union,
				// with its type and sequence number.
				seq := int64(0)
				for _, e := range out.Events {
					if e == "PRICE" {
						continue
					}
					name, data, _ := strings.Cut(e, " ")
					var u responses.ResponseStreamEventUnion
					if err := json.Unmarshal([]byte(data), &u); err != nil || u.Type != name || u.SequenceNumber != seq {
						t.Errorf("event %s: type %q seq %d (want %d) (%v)", name, u.Type, u.SequenceNumber, seq, err)
					}
					seq++
				}
			})
		}
	}
}

// TestResponsesStreamSDKAccumulates: the last event's Response, as
// openai-go reads it, has the answer's text.
func TestResponsesStreamSDKAccumulates(t *testing.T) {
	ans, c := responsesAnswer(t, true, "", nil, clientapitest.Chunk(`{"content":"Hel"}`, ""), clientapitest.Chunk(`{"content":"lo"}`, "stop"), clientapitest.UsageChunk)
	var out clientapitest.RecordingEmitter
	c.Answer(ans, &out)
	_, data, _ := strings.Cut(out.Events[len(out.Events)-1], " ")
	var u responses.ResponseStreamEventUnion
	if err := json.Unmarshal([]byte(data), &u); err != nil {
		t.Fatal(err)
	}
	done := u.AsResponseCompleted()
	if done.Response.OutputText() != "Hello" || done.Response.Usage.TotalTokens != 8 {
		t.Errorf("completed response: text %q usage %+v", done.Response.OutputText(), done.Response.Usage)
	}
}

// TestResponsesStreamCanceled: a client gone without a key gets nothing more,
// and nothing is priced nor kept by the codec.
func TestResponsesStreamCanceled(t *testing.T) {
	ans, c := responsesAnswer(t, true, "", context.Canceled, clientapitest.Chunk(`{"content":"Hi"}`, ""))
	c.turn = turnFunc(func(json.RawMessage, []json.RawMessage, llm.Usage) { t.Error("turn kept") })
	var out clientapitest.RecordingEmitter
	res := c.Answer(ans, &out)
	if !errors.Is(res.Err, context.Canceled) || out.Priced != 0 || len(out.Events) != 5 {
		t.Errorf("result %+v, events %q", res, out.Events)
	}
}

func TestResponsesJoinBroken(t *testing.T) {
	ev := (&responsesCodec{}).JoinBroken("the original answer is no longer available")
	want := idempotency.Event{Name: "error", Data: []byte(`{"type":"error","code":"idempotency_replay_unavailable","message":"the original answer is no longer available","param":null,"sequence_number":0}`)}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var e responses.ResponseErrorEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil || e.Code != "idempotency_replay_unavailable" {
		t.Errorf("openai-go reads %+v (%v)", e, err)
	}
}
