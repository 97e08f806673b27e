package adaptertest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// NewResponsesFake starts a fake upstream that speaks the OpenAI Responses
// API (providertest.NewResponses) and answers its calls as s says, for an
// adapter that translates the suite's Chat Completions request into a
// Responses one. It is closed when the test ends; URL ends in /v1.
//
// The Script in Responses' terms: FinishStop and FinishStopSequence end with
// response.completed, FinishToolCalls too (with a function_call item),
// FinishLength with response.incomplete for max_output_tokens,
// FinishContentFilter with response.incomplete for content_filter; CutError
// sends an "error" event; a keep-alive is an event of a kind the adapter
// does not know. A Responses stream has no end marker apart from its
// terminal event, nor stop sequences: the adapter's world lacks EndMarker
// and StopSequences.
func NewResponsesFake(t *testing.T, s Script) Fake {
	t.Helper()
	if s.KeepAlive {
		return responsesKeepAliveFake(t, s)
	}
	srv := providertest.NewResponses(t)
	r := response(ChatCompletions, s) // the Chat words are the fake's FinishReason readings
	if loc, ok := r.Header["Location"]; ok && loc != "" {
		r.Header["Location"] = providertest.ResponsesPath
	}
	if s.Cut == CutMalformed {
		r.Body, r.Header = responsesMalformedBody(s)
	}
	srv.SetDefault(r)
	f := Fake{URL: srv.URL(), Calls: srv.Calls, Received: func() []Received {
		var out []Received
		for _, req := range srv.Requests() {
			out = append(out, readResponsesRequest(t, req.Body))
		}
		return out
	}}
	if s.Refused {
		srv.Close() // nothing listens at URL any more
	}
	return f
}

// responsesStreamStart is the opening events of a Responses stream with a
// message item, and the output_text deltas of pieces.
func responsesStreamStart(pieces []string) []event {
	seq := 0
	next := func() int { seq++; return seq - 1 }
	eventHead := func(typ string) responses.EventHead { return responses.EventHead{Type: typ, SequenceNumber: next()} }
	head := malformedResponse(responses.StatusInProgress, []any{})
	events := []event{
		{responses.EventCreated, responses.ResponseEvent{EventHead: eventHead(responses.EventCreated), Response: head}},
		{responses.EventInProgress, responses.ResponseEvent{EventHead: eventHead(responses.EventInProgress), Response: head}},
		{responses.EventOutputItemAdded, responses.OutputItemEvent{EventHead: eventHead(responses.EventOutputItemAdded), Item: responses.MessageItem{ID: "msg_malformed", Type: responses.ItemMessage, Status: responses.StatusInProgress,
			Content: []any{}, Role: responses.RoleAssistant}}},
		{responses.EventContentPartAdded, responses.ContentPartEvent{EventHead: eventHead(responses.EventContentPartAdded), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: "msg_malformed"}}, Part: outputText("")}},
	}
	for _, piece := range pieces {
		events = append(events, event{responses.EventOutputTextDelta, responses.OutputTextDeltaEvent{EventHead: eventHead(responses.EventOutputTextDelta), PartAt: responses.PartAt{ItemAt: responses.ItemAt{ItemID: "msg_malformed"}}, Delta: piece, Logprobs: []json.RawMessage{}}})
	}
	return events
}

// malformedResponse is the Response of a malformed answer, with status
// and output.
func malformedResponse(status string, output []any) *responses.Response {
	return &responses.Response{ID: "resp_malformed", Object: responses.ObjectResponse, CreatedAt: providertest.Created,
		Status: status, Model: RouteModel, Output: output,
		ToolChoice: json.RawMessage(`"auto"`), Tools: []json.RawMessage{}, Metadata: json.RawMessage(`{}`)}
}

// outputText is an output_text part of text.
func outputText(text string) responses.OutputText {
	return responses.OutputText{Type: responses.PartOutputText, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: text}
}

// responsesMalformedBody is an answer whose opening and first s.CutAfter
// pieces are Responses', followed by a piece whose data is cut off in the
// middle of its JSON; with s.JSON, a Response cut off in the middle.
func responsesMalformedBody(s Script) (string, map[string]string) {
	if s.JSON {
		return string(cutOff(malformedResponse(responses.StatusCompleted, []any{responses.MessageItem{ID: "msg_malformed",
			Type: responses.ItemMessage, Status: responses.StatusCompleted, Content: []any{outputText(cutText)}, Role: responses.RoleAssistant}}))), jsonHeader
	}
	return sseBody(responsesStreamStart(append(slices.Clip(s.Text[:s.CutAfter]), cutText)), true), sseHeader
}

// responsesKeepAliveFake serves every call with the opening and s.CutAfter
// pieces of a stream, then an event of a kind no adapter knows (it carries
// no chunk), then nothing until the client goes.
func responsesKeepAliveFake(t *testing.T, s Script) Fake {
	t.Helper()
	body := sseBody(responsesStreamStart(s.Text[:s.CutAfter]), false) +
		"event: keepalive\ndata: {\"type\":\"keepalive\",\"sequence_number\":99}\n\n"
	return stallServer(t, body, "/v1", func(b []byte) Received { return readResponsesRequest(t, b) })
}

// readResponsesRequest reads a Responses request body in the suite's terms:
// instructions are the system prompt, the input's message items the
// messages (their text parts joined; an item of another kind is a message
// whose role is its type, with no text), max_output_tokens the cap.
func readResponsesRequest(t *testing.T, body []byte) Received {
	t.Helper()
	v, ok := chat.ParseObject(body)
	if !ok {
		t.Fatalf("the upstream received a body that is not a request:\n%s", body)
	}
	// decode reads a member of the request into into; absent leaves it.
	decode := func(raw json.RawMessage, into any) {
		t.Helper()
		if len(raw) == 0 {
			return
		}
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatalf("the upstream received a body that is not a request: %v\n%s", err, body)
		}
	}
	var (
		maxOutput *int
		tools     []responses.FunctionTool
	)
	r := Received{Body: body}
	decode(v.Get("model"), &r.Model)
	decode(v.Get("stream"), &r.Stream)
	decode(v.Get("instructions"), &r.System)
	decode(v.Get("temperature"), &r.Temperature)
	decode(v.Get("max_output_tokens"), &maxOutput)
	decode(v.Get("tools"), &tools)
	if maxOutput != nil {
		r.MaxTokens = *maxOutput
	}
	if stop := v.Get("stop"); stop != nil {
		t.Errorf("a Responses request with stop %s: the API has no such field", stop)
	}
	var input string
	if json.Unmarshal(v.Get("input"), &input) == nil {
		r.Messages = []Message{{Role: responses.RoleUser, Text: input}}
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(v.Get("input"), &items); err != nil {
			t.Fatalf("input %s is neither a string nor a list of items: %v", v.Get("input"), err)
		}
		for _, raw := range items {
			it, ok := chat.ParseObject(raw)
			if !ok {
				t.Fatalf("input item %s is not an object", raw)
			}
			var typ, role string
			decode(it.Get("type"), &typ)
			decode(it.Get("role"), &role)
			if typ != "" && typ != responses.ItemMessage {
				r.Messages = append(r.Messages, Message{Role: typ})
				continue
			}
			r.Messages = append(r.Messages, Message{Role: role, Text: responsesText(t, it.Get("content"))})
		}
	}
	for _, tool := range tools {
		r.Tools = append(r.Tools, tool.Name)
	}
	return r
}

// responsesText is the text of a message item's content: a string, or its
// input_text and output_text parts joined.
func responsesText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	return partsText(t, raw, responses.PartInputText, responses.PartOutputText)
}
