package providertest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ResponsesPath is the only path a server made by NewResponses serves.
const ResponsesPath = "/v1/responses"

// ResponsesAnswer scripts what only a Responses answer has.
type ResponsesAnswer struct {
	// Reasoning, when set, puts a reasoning item before the answer, with
	// these summary parts (one reasoning_summary_text.delta each).
	Reasoning []string
	// EncryptedContent is the reasoning item's encrypted_content; set
	// alone, it makes a reasoning item without a summary.
	EncryptedContent string
	// CachedTokens and ReasoningTokens are the usage's
	// input_tokens_details.cached_tokens and
	// output_tokens_details.reasoning_tokens.
	CachedTokens, ReasoningTokens int
}

// NewResponses starts a fake upstream that speaks the OpenAI Responses API
// instead: POST /v1/responses, answered with the Responses event sequence
// (named events, each with "type" and "sequence_number") or, when the
// request does not ask for "stream": true, a Response object; errors in
// OpenAI's envelope. URL ends in /v1, as an OpenAI base URL does.
//
// A stream is response.created and response.in_progress (the Response with
// status in_progress), then each output item: response.output_item.added;
// for a reasoning item, per summary part, response.reasoning_summary_part.added,
// response.reasoning_summary_text.delta and .done,
// response.reasoning_summary_part.done; for the message,
// response.content_part.added, one response.output_text.delta (or
// response.refusal.delta) per piece, response.output_text.done,
// response.content_part.done; for a function call, its arguments in two
// response.function_call_arguments.delta and .done; then
// response.output_item.done. It ends with the terminal event carrying the
// whole Response.
//
// The same Response scripts it, with these readings:
//
//   - the id of call n is "resp_<n>", its message "msg_<n>", its function
//     call "fc_<n>" (call_id the ToolCall's ID, default "call_<n>"), its
//     reasoning item "rs_<n>"; created_at is Created;
//   - FinishReason is the end: "" (or "stop", "tool_calls", "completed")
//     response.completed; "length" or "max_output_tokens"
//     response.incomplete with that reason (max_output_tokens);
//     "content_filter" response.incomplete with reason content_filter;
//     "failed" response.failed with error {code: server_error, message:
//     "scripted failure"};
//   - Usage sets input_tokens and output_tokens (total_tokens their sum),
//     Responses the details; NoUsage makes usage null;
//   - NoRoleChunk leaves out response.created and response.in_progress;
//   - NoDone leaves out the terminal event;
//   - Cut counts the message's pieces (or a call's argument halves); the
//     reasoning item goes out before them, with the head;
//   - CutError sends an "error" event {type, code: server_error, message:
//     "scripted mid-stream error", param: null, sequence_number}.
func NewResponses(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, responsesProtocol)
}

// responsesAnswer is an answer in Responses' terms.
type responsesAnswer struct {
	answer
	extra     ResponsesAnswer
	respID    string
	status    string // completed, incomplete, failed
	reason    string // incomplete_details.reason
	refusal   string
	texts     []string // the message's pieces
	callID    string
	reasoning bool
	usage     any // the usage object, or nil
}

func newResponsesAnswer(a answer, resp Response) responsesAnswer {
	r := responsesAnswer{answer: a, respID: "resp_" + strings.TrimPrefix(a.id, "chatcmpl-"), status: "completed"}
	if resp.Responses != nil {
		r.extra = *resp.Responses
	}
	r.reasoning = len(r.extra.Reasoning) > 0 || r.extra.EncryptedContent != ""
	switch resp.FinishReason {
	case "length", "max_output_tokens":
		r.status, r.reason = "incomplete", "max_output_tokens"
	case "content_filter":
		r.status, r.reason = "incomplete", "content_filter"
	case "failed":
		r.status = "failed"
	}
	switch {
	case a.toolCall != nil:
		r.callID = a.toolCall.ID
	case resp.Refusal != "":
		r.refusal = resp.Refusal
		r.texts = []string{resp.Refusal}
	default:
		for _, d := range a.deltas {
			r.texts = append(r.texts, *d.Content)
		}
	}
	if !resp.NoUsage {
		r.usage = obj(
			"input_tokens", a.usage.PromptTokens,
			"input_tokens_details", obj("cached_tokens", r.extra.CachedTokens),
			"output_tokens", a.usage.CompletionTokens,
			"output_tokens_details", obj("reasoning_tokens", r.extra.ReasoningTokens),
			"total_tokens", a.usage.PromptTokens+a.usage.CompletionTokens,
		)
	}
	return r
}

func (r *responsesAnswer) n() string { return strings.TrimPrefix(r.respID, "resp_") }

// object is the Response with status and output.
func (r *responsesAnswer) object(status string, output []any, usage any) ordered {
	var errObj, details any
	if status == "failed" {
		errObj = obj("code", "server_error", "message", "scripted failure")
	}
	if status == "incomplete" {
		details = obj("reason", r.reason)
	}
	if output == nil {
		output = []any{}
	}
	return obj(
		"id", r.respID, "object", "response", "created_at", Created, "status", status,
		"background", false, "error", errObj, "incomplete_details", details,
		"model", r.model, "output", output, "parallel_tool_calls", true,
		"store", false, "tool_choice", "auto", "tools", []any{}, "usage", usage, "metadata", obj(),
	)
}

// The output items, as they end.

func (r *responsesAnswer) reasoningItem() ordered {
	summary := []any{}
	for _, s := range r.extra.Reasoning {
		summary = append(summary, obj("type", "summary_text", "text", s))
	}
	it := obj("id", "rs_"+r.n(), "type", "reasoning", "summary", summary)
	if r.extra.EncryptedContent != "" {
		it = append(it, "encrypted_content", r.extra.EncryptedContent)
	}
	return it
}

func (r *responsesAnswer) messagePart(text string) ordered {
	if r.refusal != "" {
		return obj("type", "refusal", "refusal", text)
	}
	return obj("type", "output_text", "annotations", []any{}, "logprobs", []any{}, "text", text)
}

func (r *responsesAnswer) messageItem(status string, content []any) ordered {
	return obj("id", "msg_"+r.n(), "type", "message", "status", status, "content", content, "role", "assistant")
}

func (r *responsesAnswer) callItem(status, args string) ordered {
	return obj("id", "fc_"+r.n(), "type", "function_call", "status", status,
		"arguments", args, "call_id", r.callID, "name", r.toolCall.Name)
}

// output is the answer's items, whole; the last one's status is
// itemStatus.
func (r *responsesAnswer) output(itemStatus string) []any {
	var out []any
	if r.reasoning {
		out = append(out, r.reasoningItem())
	}
	if r.toolCall != nil {
		return append(out, r.callItem(itemStatus, r.toolCall.Arguments))
	}
	return append(out, r.messageItem(itemStatus, []any{r.messagePart(strings.Join(r.texts, ""))}))
}

func (s *Server) respondResponses(ctx context.Context, w http.ResponseWriter, a answer, resp Response) {
	r := newResponsesAnswer(a, resp)
	if stream, _ := a.req.JSON["stream"].(bool); stream && !resp.NonStreaming {
		s.streamResponses(ctx, w, r, resp)
	} else {
		s.completeResponses(ctx, w, r, resp)
	}
}

// streamResponses sends a Responses event stream.
func (s *Server) streamResponses(ctx context.Context, w http.ResponseWriter, r responsesAnswer, resp Response) {
	send, rc := startStream(w, resp)
	seq := 0
	sendEvent := func(typ string, kv ...any) bool {
		ev := append(obj("type", typ, "sequence_number", seq), kv...)
		seq++
		return send(typ, marshal(ev))
	}
	cutStream := func(how CutMode) {
		if how == CutError {
			sendEvent("error", "code", "server_error", "message", "scripted mid-stream error", "param", nil)
			return
		}
		s.cutStream(ctx, w, how, func([]byte) bool { return true })
	}

	if resp.NoRoleChunk {
		if rc.Flush() != nil {
			return
		}
	} else {
		head := r.object("in_progress", nil, nil)
		if !sendEvent("response.created", "response", head) || !sendEvent("response.in_progress", "response", head) {
			return
		}
	}
	oi := 0
	if r.reasoning {
		id := "rs_" + r.n()
		if !sendEvent("response.output_item.added", "output_index", oi, "item", obj("id", id, "type", "reasoning", "summary", []any{})) {
			return
		}
		for k, text := range r.extra.Reasoning {
			at := []any{"item_id", id, "output_index", oi, "summary_index", k}
			if !sendEvent("response.reasoning_summary_part.added", append(at, "part", obj("type", "summary_text", "text", ""))...) ||
				!sendEvent("response.reasoning_summary_text.delta", append(at, "delta", text)...) ||
				!sendEvent("response.reasoning_summary_text.done", append(at, "text", text)...) ||
				!sendEvent("response.reasoning_summary_part.done", append(at, "part", obj("type", "summary_text", "text", text))...) {
				return
			}
		}
		if !sendEvent("response.output_item.done", "output_index", oi, "item", r.reasoningItem()) {
			return
		}
		oi++
	}

	// The answer's item: its opening events, its pieces, its closing ones.
	var open, finish func() bool
	var pieces []string
	if r.toolCall != nil {
		id := "fc_" + r.n()
		at := []any{"item_id", id, "output_index", oi}
		first, second := splitHalf(r.toolCall.Arguments)
		pieces = []string{first, second}
		open = func() bool {
			return sendEvent("response.output_item.added", "output_index", oi, "item", r.callItem("in_progress", ""))
		}
		send := func(i int) bool {
			return sendEvent("response.function_call_arguments.delta", append(at[:len(at):len(at)], "delta", pieces[i])...)
		}
		finish = func() bool {
			return sendEvent("response.function_call_arguments.done", append(at[:len(at):len(at)], "arguments", r.toolCall.Arguments)...) &&
				sendEvent("response.output_item.done", "output_index", oi, "item", r.callItem(r.itemStatus(), r.toolCall.Arguments))
		}
		if !s.streamItem(ctx, resp, pieces, open, send, finish, cutStream) {
			return
		}
	} else {
		id := "msg_" + r.n()
		at := []any{"item_id", id, "output_index", oi, "content_index", 0}
		delta, done, field := "response.output_text.delta", "response.output_text.done", "text"
		if r.refusal != "" {
			delta, done, field = "response.refusal.delta", "response.refusal.done", "refusal"
		}
		whole := strings.Join(r.texts, "")
		open = func() bool {
			return sendEvent("response.output_item.added", "output_index", oi, "item", r.messageItem("in_progress", []any{})) &&
				sendEvent("response.content_part.added", append(at[:len(at):len(at)], "part", r.messagePart(""))...)
		}
		send := func(i int) bool {
			kv := append(at[:len(at):len(at)], "delta", r.texts[i])
			if r.refusal == "" {
				kv = append(kv, "logprobs", []any{})
			}
			return sendEvent(delta, kv...)
		}
		finish = func() bool {
			kv := append(at[:len(at):len(at)], field, whole)
			if r.refusal == "" {
				kv = append(kv, "logprobs", []any{})
			}
			return sendEvent(done, kv...) &&
				sendEvent("response.content_part.done", append(at[:len(at):len(at)], "part", r.messagePart(whole))...) &&
				sendEvent("response.output_item.done", "output_index", oi, "item", r.messageItem(r.itemStatus(), []any{r.messagePart(whole)}))
		}
		if !s.streamItem(ctx, resp, r.texts, open, send, finish, cutStream) {
			return
		}
	}
	if resp.NoDone {
		return
	}
	end := map[string]string{"completed": "response.completed", "incomplete": "response.incomplete", "failed": "response.failed"}[r.status]
	sendEvent(end, "response", r.object(r.status, r.output(r.itemStatus()), r.usage))
}

// itemStatus is the status of the answer's last item: incomplete when the
// Response is.
func (r *responsesAnswer) itemStatus() string {
	if r.status == "completed" {
		return "completed"
	}
	return "incomplete"
}

// streamItem sends an item: open before its first piece (or, with none,
// after the pieces), its pieces paced and cut as resp says, then finish.
// It reports whether the stream goes on.
func (s *Server) streamItem(ctx context.Context, resp Response, pieces []string, open func() bool, send func(int) bool, finish func() bool, cutStream func(CutMode)) bool {
	opened := false
	if !s.pace(ctx, resp, len(pieces), func(i int) bool {
		if !opened {
			opened = true
			if !open() {
				return false
			}
		}
		return send(i)
	}, cutStream) {
		return false
	}
	if !opened && !open() {
		return false
	}
	return finish()
}

// completeResponses sends a Response object.
func (s *Server) completeResponses(ctx context.Context, w http.ResponseWriter, r responsesAnswer, resp Response) {
	n := len(r.texts)
	if r.toolCall != nil {
		n = 2
	}
	wait := resp.FirstChunkDelay
	if n > 1 {
		wait += time.Duration(n-1) * resp.ChunkDelay
	}
	if !s.sleep(ctx, wait) {
		return
	}
	s.writeWhole(ctx, w, marshal(r.object(r.status, r.output(r.itemStatus()), r.usage)), resp)
}
