package providertest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// ResponsesPath is the only path a server made by NewResponses serves.
const ResponsesPath = responses.PathResponses

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
	callID    string
	reasoning bool
	usage     *responses.Usage // nil: null
}

func newResponsesAnswer(a answer, resp Response) responsesAnswer {
	r := responsesAnswer{answer: a, respID: "resp_" + strings.TrimPrefix(a.id, "chatcmpl-"), status: responses.StatusCompleted}
	if resp.Responses != nil {
		r.extra = *resp.Responses
	}
	r.reasoning = len(r.extra.Reasoning) > 0 || r.extra.EncryptedContent != ""
	switch resp.FinishReason {
	case chat.FinishLength, responses.ReasonMaxOutputTokens:
		r.status, r.reason = responses.StatusIncomplete, responses.ReasonMaxOutputTokens
	case chat.FinishContentFilter:
		r.status, r.reason = responses.StatusIncomplete, responses.ReasonContentFilter
	case responses.StatusFailed:
		r.status = responses.StatusFailed
	}
	switch {
	case a.toolCall != nil:
		r.callID = a.toolCall.ID
	case resp.Refusal != "":
		r.refusal = resp.Refusal
	}
	if !resp.NoUsage {
		r.usage = &responses.Usage{
			InputTokens:         a.usage.PromptTokens,
			InputTokensDetails:  responses.InputTokensDetails{CachedTokens: int64(r.extra.CachedTokens)},
			OutputTokens:        a.usage.CompletionTokens,
			OutputTokensDetails: responses.OutputTokensDetails{ReasoningTokens: int64(r.extra.ReasoningTokens)},
			TotalTokens:         a.usage.PromptTokens + a.usage.CompletionTokens,
		}
	}
	return r
}

func (r *responsesAnswer) n() string { return strings.TrimPrefix(r.respID, "resp_") }

// object is the Response with status and output.
func (r *responsesAnswer) object(status string, output []any, usage *responses.Usage) *responses.Response {
	no := false
	o := &responses.Response{
		ID: r.respID, Object: responses.ObjectResponse, CreatedAt: Created, Status: status, Background: &no,
		Model: r.model, Output: output, ParallelToolCalls: true, Store: &no,
		ToolChoice: json.RawMessage(`"auto"`), Tools: []json.RawMessage{}, Metadata: json.RawMessage(`{}`),
	}
	if status == responses.StatusFailed {
		o.Error = &responses.Error{Code: responses.CodeServerError, Message: "scripted failure"}
	}
	if status == responses.StatusIncomplete {
		o.IncompleteDetails = &responses.IncompleteDetails{Reason: r.reason}
	}
	if o.Output == nil {
		o.Output = []any{}
	}
	if usage != nil {
		o.Usage = usage
	}
	return o
}

// The output items, as they end.

func (r *responsesAnswer) reasoningItem() *responses.ReasoningItem {
	summary := []responses.SummaryText{}
	for _, s := range r.extra.Reasoning {
		summary = append(summary, responses.SummaryText{Type: responses.PartSummaryText, Text: s})
	}
	return &responses.ReasoningItem{ID: "rs_" + r.n(), Type: responses.ItemReasoning, Summary: summary,
		EncryptedContent: r.extra.EncryptedContent}
}

func (r *responsesAnswer) messagePart(text string) any {
	if r.refusal != "" {
		return responses.RefusalPart{Type: responses.PartRefusal, Refusal: text}
	}
	return responses.OutputText{Type: responses.PartOutputText, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: text}
}

func (r *responsesAnswer) messageItem(status string, content []any) *responses.MessageItem {
	return &responses.MessageItem{ID: "msg_" + r.n(), Type: responses.ItemMessage, Status: status, Content: content, Role: responses.RoleAssistant}
}

func (r *responsesAnswer) callItem(status, args string) *responses.FunctionCallItem {
	return &responses.FunctionCallItem{ID: "fc_" + r.n(), Type: responses.ItemFunctionCall, Status: status,
		Arguments: args, CallID: r.callID, Name: r.toolCall.Name}
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
	return append(out, r.messageItem(itemStatus, []any{r.messagePart(strings.Join(r.pieces, ""))}))
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
	next := func() int { seq++; return seq - 1 }
	eventHead := func(typ string) responses.EventHead { return responses.EventHead{Type: typ, SequenceNumber: next()} }
	sendEvent := func(typ string, v any) bool { return send(typ, marshal(v)) }
	itemEvent := func(typ string, oi int, item any) bool {
		return sendEvent(typ, responses.OutputItemEvent{EventHead: eventHead(typ), OutputIndex: oi, Item: item})
	}
	sendError := func() {
		code := responses.CodeServerError
		sendEvent(responses.EventError, midStreamErrorEvent{Type: responses.EventError, SequenceNumber: next(),
			Code: &code, Message: "scripted mid-stream error"})
	}

	if resp.NoRoleChunk {
		if rc.Flush() != nil {
			return
		}
	} else {
		head := r.object(responses.StatusInProgress, nil, nil)
		if !sendEvent(responses.EventCreated, responses.ResponseEvent{EventHead: eventHead(responses.EventCreated), Response: head}) ||
			!sendEvent(responses.EventInProgress, responses.ResponseEvent{EventHead: eventHead(responses.EventInProgress), Response: head}) {
			return
		}
	}
	oi := 0
	if r.reasoning {
		id := "rs_" + r.n()
		if !itemEvent(responses.EventOutputItemAdded, oi, responses.ReasoningItem{ID: id, Type: responses.ItemReasoning, Summary: []responses.SummaryText{}}) {
			return
		}
		for k, text := range r.extra.Reasoning {
			part := func(typ, text string) responses.SummaryPartEvent {
				return responses.SummaryPartEvent{EventHead: eventHead(typ), SummaryAt: responses.SummaryAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}, SummaryIndex: k}, Part: responses.SummaryText{Type: responses.PartSummaryText, Text: text}}
			}
			if !sendEvent(responses.EventReasoningSummaryPartAdded, part(responses.EventReasoningSummaryPartAdded, "")) ||
				!sendEvent(responses.EventReasoningSummaryTextDelta, responses.SummaryTextDeltaEvent{EventHead: eventHead(responses.EventReasoningSummaryTextDelta), SummaryAt: responses.SummaryAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}, SummaryIndex: k}, Delta: text}) ||
				!sendEvent(responses.EventReasoningSummaryTextDone, responses.SummaryTextDoneEvent{EventHead: eventHead(responses.EventReasoningSummaryTextDone), SummaryAt: responses.SummaryAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}, SummaryIndex: k}, Text: text}) ||
				!sendEvent(responses.EventReasoningSummaryPartDone, part(responses.EventReasoningSummaryPartDone, text)) {
				return
			}
		}
		if !itemEvent(responses.EventOutputItemDone, oi, r.reasoningItem()) {
			return
		}
		oi++
	}

	// The answer's item: its opening events, its pieces, its closing ones.
	var open, finish func() bool
	if r.toolCall != nil {
		id := "fc_" + r.n()
		open = func() bool {
			return itemEvent(responses.EventOutputItemAdded, oi, r.callItem(responses.StatusInProgress, ""))
		}
		send := func(i int) bool {
			return sendEvent(responses.EventFunctionCallArgumentsDelta, responses.ArgumentsDeltaEvent{EventHead: eventHead(responses.EventFunctionCallArgumentsDelta), ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}, Delta: r.pieces[i]})
		}
		finish = func() bool {
			return sendEvent(responses.EventFunctionCallArgumentsDone, responses.ArgumentsDoneEvent{EventHead: eventHead(responses.EventFunctionCallArgumentsDone), ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}, Arguments: r.toolCall.Arguments}) &&
				itemEvent(responses.EventOutputItemDone, oi, r.callItem(r.itemStatus(), r.toolCall.Arguments))
		}
		if !s.streamItem(ctx, w, resp, r.pieces, open, send, finish, sendError) {
			return
		}
	} else {
		id := "msg_" + r.n()
		part := func(typ string, p any) bool {
			return sendEvent(typ, responses.ContentPartEvent{EventHead: eventHead(typ), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}}, Part: p})
		}
		whole := strings.Join(r.pieces, "")
		open = func() bool {
			return itemEvent(responses.EventOutputItemAdded, oi, r.messageItem(responses.StatusInProgress, []any{})) &&
				part(responses.EventContentPartAdded, r.messagePart(""))
		}
		send := func(i int) bool {
			if r.refusal != "" {
				return sendEvent(responses.EventRefusalDelta, responses.RefusalDeltaEvent{EventHead: eventHead(responses.EventRefusalDelta), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}}, Delta: r.pieces[i]})
			}
			return sendEvent(responses.EventOutputTextDelta, responses.OutputTextDeltaEvent{EventHead: eventHead(responses.EventOutputTextDelta), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}}, Delta: r.pieces[i], Logprobs: []json.RawMessage{}})
		}
		finish = func() bool {
			var done bool
			if r.refusal != "" {
				done = sendEvent(responses.EventRefusalDone, responses.RefusalDoneEvent{EventHead: eventHead(responses.EventRefusalDone), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}}, Refusal: whole})
			} else {
				done = sendEvent(responses.EventOutputTextDone, responses.OutputTextDoneEvent{EventHead: eventHead(responses.EventOutputTextDone), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: id, OutputIndex: oi}}, Text: whole, Logprobs: []json.RawMessage{}})
			}
			return done && part(responses.EventContentPartDone, r.messagePart(whole)) &&
				itemEvent(responses.EventOutputItemDone, oi, r.messageItem(r.itemStatus(), []any{r.messagePart(whole)}))
		}
		if !s.streamItem(ctx, w, resp, r.pieces, open, send, finish, sendError) {
			return
		}
	}
	if resp.NoDone {
		return
	}
	end := map[string]string{responses.StatusCompleted: responses.EventCompleted, responses.StatusIncomplete: responses.EventIncomplete,
		responses.StatusFailed: responses.EventFailed}[r.status]
	sendEvent(end, responses.ResponseEvent{EventHead: eventHead(end), Response: r.object(r.status, r.output(r.itemStatus()), r.usage)})
}

// itemStatus is the status of the answer's last item: incomplete when the
// Response is.
func (r *responsesAnswer) itemStatus() string {
	if r.status == responses.StatusCompleted {
		return responses.StatusCompleted
	}
	return responses.StatusIncomplete
}

// streamItem sends an item: open before its first piece (or, with none,
// after the pieces), its pieces paced and cut as resp says, then finish.
// It reports whether the stream goes on.
func (s *Server) streamItem(ctx context.Context, w http.ResponseWriter, resp Response, pieces []string, open func() bool, send func(int) bool, finish func() bool, sendError func()) bool {
	opened := false
	if !s.pace(ctx, w, resp, len(pieces), func(i int) bool {
		if !opened {
			opened = true
			if !open() {
				return false
			}
		}
		return send(i)
	}, sendError) {
		return false
	}
	if !opened && !open() {
		return false
	}
	return finish()
}

// completeResponses sends a Response object.
func (s *Server) completeResponses(ctx context.Context, w http.ResponseWriter, r responsesAnswer, resp Response) {
	if !s.generate(ctx, resp, len(r.pieces)) {
		return
	}
	s.writeWhole(ctx, w, marshal(r.object(r.status, r.output(r.itemStatus()), r.usage)), resp)
}

// midStreamErrorEvent is the error event a CutError sends: the members of
// responses.ErrorEvent, in an order of this server's own (sequence_number
// second, as in its other events), which the gateway's own error events do
// not keep.
type midStreamErrorEvent struct {
	Type           string  `json:"type"`
	SequenceNumber int     `json:"sequence_number"`
	Code           *string `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
}
