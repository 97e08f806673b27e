package messages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/clientapi/clientapitest"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// messagesAnswer starts a real router.Answer from a provider that sends
// raws then end, at prices 1 and 2 USD per million tokens.
func messagesAnswer(t *testing.T, stream bool, end error, raws ...string) (*router.Answer, *messagesCodec) {
	t.Helper()
	body := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	if stream {
		body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`
	}
	ans, chat := clientapitest.ScriptedAnswer(t, body, end, raws...)
	return ans, &messagesCodec{requestID: "req_0123abcd", req: chat, model: "claude-x"}
}

const (
	msgUsageJSON = `{"input_tokens":3,"output_tokens":5,"cost":0.000013}`
)

func message(content, stop string) string {
	return `{"id":"msg_0123abcd","type":"message","role":"assistant","model":"up-model","content":` + content +
		`,"stop_reason":` + stop + `,"stop_sequence":null,"usage":` + msgUsageJSON + "}\n"
}

func TestMessagesNonStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		raws []string
		end  error
		want string
		err  error
	}{
		{"text", []string{clientapitest.Chunk(`{"role":"assistant","content":"Hel"}`, ""), clientapitest.Chunk(`{"content":"lo"}`, "stop"), clientapitest.UsageChunk}, nil,
			message(`[{"type":"text","text":"Hello"}]`, `"end_turn"`), nil},
		{"tool call", clientapitest.ToolChunks, nil,
			message(`[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"call_1","name":"weather","input":{"city":"Paris"}},{"type":"tool_use","id":"call_2","name":"time","input":{}}]`, `"tool_use"`), nil},
		{"refusal", []string{clientapitest.Chunk(`{"role":"assistant","refusal":"I can't help with that."}`, "stop"), clientapitest.UsageChunk}, nil,
			message(`[{"type":"text","text":"I can't help with that."}]`, `"refusal"`), nil},
		{"content filter", []string{clientapitest.Chunk(`{"content":"Partial"}`, "content_filter"), clientapitest.UsageChunk}, nil,
			message(`[{"type":"text","text":"Partial"}]`, `"refusal"`), nil},
		{"length", []string{clientapitest.Chunk(`{"content":"Once upon"}`, "length"), clientapitest.UsageChunk}, nil,
			message(`[{"type":"text","text":"Once upon"}]`, `"max_tokens"`), nil},
		{"incomplete", []string{clientapitest.Chunk(`{"content":"Once upon"}`, ""), clientapitest.UsageChunk, clientapitest.Chunk(`{"tool_calls":[{"index":0,"id":"call_9","function":{"name":"f","arguments":"{\"a\":"}}]}`, "")}, llm.ErrStreamCut,
			message(`[{"type":"text","text":"Once upon"},{"type":"tool_use","id":"call_9","name":"f","input":{}}]`, `null`), router.ErrIncomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans, c := messagesAnswer(t, false, tc.end, tc.raws...)
			var out clientapitest.RecordingEmitter
			res := c.Answer(ans, &out)
			if !errors.Is(res.Err, tc.err) || !res.Answered {
				t.Fatalf("result %+v, want err %v", res, tc.err)
			}
			if diff := cmp.Diff(tc.want, string(out.Whole)); diff != "" {
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
		})
	}
}

// TestMessagesNonStreamFailure: a provider failure after output and the
// request's ceiling are errors, and nothing is written.
func TestMessagesNonStreamFailure(t *testing.T) {
	for _, tc := range []struct {
		end  error
		code llm.Code
	}{
		{&llm.ProviderError{Class: llm.FailTransient, Message: "boom"}, llm.CodeAllProvidersFailed},
		{context.DeadlineExceeded, llm.CodeRequestTimeout},
	} {
		ans, c := messagesAnswer(t, false, tc.end, clientapitest.Chunk(`{"content":"Hi"}`, ""))
		var out clientapitest.RecordingEmitter
		res := c.Answer(ans, &out)
		if res.Answered || llm.AsError(res.Err).Code != tc.code || out.Status != 0 || out.Priced != 0 {
			t.Errorf("%v: result %+v, status %d, priced %d; want %s", tc.end, res, out.Status, out.Priced, tc.code)
		}
	}
	ans, c := messagesAnswer(t, false, context.Canceled, clientapitest.Chunk(`{"content":"Hi"}`, ""))
	if res := c.Answer(ans, &clientapitest.RecordingEmitter{}); !errors.Is(res.Err, context.Canceled) || res.Answered {
		t.Errorf("canceled: %+v", res)
	}
}

const (
	evStart = `message_start {"type":"message_start","message":{"id":"msg_0123abcd","type":"message","role":"assistant","model":"up-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`
	evPing  = `ping {"type":"ping"}`
	evStop  = `message_stop {"type":"message_stop"}`
)

func evDelta(stop string) string {
	return `message_delta {"type":"message_delta","delta":{"stop_reason":` + stop + `,"stop_sequence":null},"usage":` + msgUsageJSON + `}`
}

func TestMessagesStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		raws []string
		end  error
		want []string
		err  error
	}{
		{"text", []string{clientapitest.Chunk(`{"role":"assistant","content":""}`, ""), clientapitest.Chunk(`{"content":"Hel"}`, ""), clientapitest.Chunk(`{"content":"lo"}`, "stop"), clientapitest.UsageChunk}, nil, []string{
			evStart, evPing,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			"PRICE", evDelta(`"end_turn"`), evStop,
		}, nil},
		{"tool calls", clientapitest.ToolChunks, nil, []string{
			evStart, evPing,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"weather","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"Paris\"}"}}`,
			`content_block_stop {"type":"content_block_stop","index":1}`,
			`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_2","name":"time","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
			`content_block_stop {"type":"content_block_stop","index":2}`,
			"PRICE", evDelta(`"tool_use"`), evStop,
		}, nil},
		{"refusal", []string{clientapitest.Chunk(`{"refusal":"No."}`, "stop"), clientapitest.UsageChunk}, nil, []string{
			evStart, evPing,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"No."}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			"PRICE", evDelta(`"refusal"`), evStop,
		}, nil},
		{"error after output", []string{clientapitest.Chunk(`{"content":"Hi"}`, ""), clientapitest.UsageChunk}, &llm.ProviderError{Class: llm.FailTransient, Message: "reset"}, []string{
			evStart, evPing,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			"PRICE",
			`error {"type":"error","error":{"type":"api_error","message":"provider p failed after its answer had started; the answer is cut short","code":"stream_interrupted"}}`,
		}, &llm.ProviderError{}},
		{"overloaded after output", []string{clientapitest.Chunk(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{"}}]}`, ""), clientapitest.UsageChunk}, &llm.ProviderError{Class: llm.FailTransient, Status: 529}, []string{
			evStart, evPing,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"call_1","name":"f","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			"PRICE",
			`error {"type":"error","error":{"type":"overloaded_error","message":"provider p failed after its answer had started; the answer is cut short","code":"stream_interrupted"}}`,
		}, &llm.ProviderError{}},
		{"timeout after output", []string{clientapitest.Chunk(`{"content":"Hi"}`, ""), clientapitest.UsageChunk}, context.DeadlineExceeded, []string{
			evStart, evPing,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			"PRICE",
			`error {"type":"error","error":{"type":"timeout_error","message":"the request reached its time limit; the answer is cut short","code":"request_timeout"}}`,
		}, context.DeadlineExceeded},
		{"incomplete", []string{clientapitest.Chunk(`{"content":"Hi"}`, ""), clientapitest.UsageChunk}, llm.ErrStreamCut, []string{
			evStart, evPing,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			"PRICE", evDelta(`null`),
		}, router.ErrIncomplete},
	} {
		// Keyed or not, a Messages stream is the same: its usage is always
		// in message_delta.
		for _, keyed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keyed=%v", tc.name, keyed), func(t *testing.T) {
				ans, c := messagesAnswer(t, true, tc.end, tc.raws...)
				c.keyed = keyed
				var out clientapitest.RecordingEmitter
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
				for _, ev := range out.Events[2:] {
					if ev == "PRICE" {
						continue
					}
					name, data, _ := strings.Cut(ev, " ")
					var v struct{ Type string }
					if err := json.Unmarshal([]byte(data), &v); err != nil || v.Type != name {
						t.Errorf("event %s: type %q (%v)", name, v.Type, err)
					}
				}
			})
		}
	}
}

// TestMessagesStreamCanceled: a client gone without a key gets nothing more,
// and nothing is priced by the codec.
func TestMessagesStreamCanceled(t *testing.T) {
	ans, c := messagesAnswer(t, true, context.Canceled, clientapitest.Chunk(`{"content":"Hi"}`, ""))
	var out clientapitest.RecordingEmitter
	res := c.Answer(ans, &out)
	if !errors.Is(res.Err, context.Canceled) || out.Priced != 0 || len(out.Events) != 4 {
		t.Errorf("result %+v, events %q", res, out.Events)
	}
}

func TestMessagesJoinBroken(t *testing.T) {
	ev := (&messagesCodec{}).JoinBroken("the original answer is no longer available")
	want := idempotency.Event{Name: "error", Data: []byte(`{"type":"error","error":{"type":"idempotency_error","message":"the original answer is no longer available","code":"idempotency_replay_unavailable"}}`)}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAnthropicErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		header map[string]string
		body   string
	}{
		{llm.Errorf(llm.CodeInvalidRequest, "max_tokens", "max_tokens is required"), 400, nil,
			`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens is required","code":"invalid_request","param":"max_tokens"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeInvalidAPIKey, "", "bad key"), 401, nil,
			`{"type":"error","error":{"type":"authentication_error","message":"bad key","code":"invalid_api_key"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeInsufficientBalance, "", "no money"), 402, nil,
			`{"type":"error","error":{"type":"billing_error","message":"no money","code":"insufficient_balance"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeModelNotFound, "model", "no such model"), 404, nil,
			`{"type":"error","error":{"type":"not_found_error","message":"no such model","code":"model_not_found","param":"model"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeIdempotencyConflict, "", "key reused"), 409, map[string]string{"X-Should-Retry": "false"},
			`{"type":"error","error":{"type":"idempotency_error","message":"key reused","code":"idempotency_conflict"},"request_id":"req_0123abcd"}`},
		{&llm.Error{Code: llm.CodeStoreUnavailable, Message: "store down", RetryAfter: time.Second}, 503, map[string]string{"Retry-After": "1"},
			`{"type":"error","error":{"type":"idempotency_error","message":"store down","code":"idempotency_store_unavailable"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeRequestTooLarge, "", "too big"), 413, nil,
			`{"type":"error","error":{"type":"request_too_large","message":"too big","code":"request_too_large"},"request_id":"req_0123abcd"}`},
		{&llm.Error{Code: llm.CodeCapacity, Message: "busy", RetryAfter: 1500 * time.Millisecond}, 429, map[string]string{"Retry-After": "2", "X-Gateway-Admission-Refused": "true"},
			`{"type":"error","error":{"type":"rate_limit_error","message":"busy","code":"capacity"},"request_id":"req_0123abcd"}`},
		{errors.New("secret detail"), 500, nil,
			`{"type":"error","error":{"type":"api_error","message":"internal error","code":"internal_error"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeAllProvidersFailed, "", "all failed"), 502, nil,
			`{"type":"error","error":{"type":"api_error","message":"all failed","code":"all_providers_failed"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeNoLiveProvider, "", "none live"), 503, nil,
			`{"type":"error","error":{"type":"overloaded_error","message":"none live","code":"no_live_provider"},"request_id":"req_0123abcd"}`},
		{llm.Errorf(llm.CodeRequestTimeout, "", "too slow"), 504, nil,
			`{"type":"error","error":{"type":"timeout_error","message":"too slow","code":"request_timeout"},"request_id":"req_0123abcd"}`},
	} {
		rr := httptest.NewRecorder()
		rr.Header().Set("X-Request-Id", "req_0123abcd")
		rec := &clientapi.Recorder{ResponseWriter: rr}
		if got := clientapi.WriteAnthropicError(rec, tc.err); got != tc.status || rr.Code != tc.status || rec.Status != tc.status {
			t.Errorf("%v: status %d, wrote %d, want %d", tc.err, got, rr.Code, tc.status)
		}
		if rec.Code != llm.AsError(tc.err).Code {
			t.Errorf("%v: recorder code %q", tc.err, rec.Code)
		}
		if diff := cmp.Diff(tc.body+"\n", rr.Body.String()); diff != "" {
			t.Errorf("%v: body (-want +got):\n%s", tc.err, diff)
		}
		want := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_0123abcd"}}
		for k, v := range tc.header {
			want.Set(k, v)
		}
		if diff := cmp.Diff(want, rr.Header()); diff != "" {
			t.Errorf("%v: headers (-want +got):\n%s", tc.err, diff)
		}
	}
	// Without an X-Request-Id the envelope has no request_id.
	rr := httptest.NewRecorder()
	clientapi.WriteAnthropicError(rr, llm.Errorf(llm.CodeNotFound, "", "no such endpoint"))
	if want := `{"type":"error","error":{"type":"not_found_error","message":"no such endpoint","code":"not_found"}}` + "\n"; rr.Body.String() != want || rr.Code != 404 {
		t.Errorf("got %d %s", rr.Code, rr.Body)
	}
}
