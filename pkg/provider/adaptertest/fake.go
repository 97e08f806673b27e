package adaptertest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/sse"
	"github.com/buzzgate/buzzgate/pkg/wire/chat"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// Protocol is a wire protocol pkg/providertest's fake upstreams speak.
type Protocol int

// The protocols.
const (
	// ChatCompletions is OpenAI's Chat Completions (providertest.New).
	ChatCompletions Protocol = iota
	// Messages is Anthropic's Messages (providertest.NewAnthropic).
	Messages
)

// Fake is a pkg/providertest server scripted by a Script: the upstream of
// the adapters that speak one of its protocols.
type Fake struct {
	// URL is the base URL to configure the adapter with.
	URL      string
	Calls    func() int
	Received func() []Received
}

// NewFake starts a fake upstream that speaks p and answers its calls as s
// says. It is closed when the test ends.
func NewFake(t *testing.T, p Protocol, s Script) Fake {
	t.Helper()
	if s.KeepAlive {
		return keepAliveFake(t, p, s)
	}
	var srv *providertest.Server
	if p == Messages {
		srv = providertest.NewAnthropic(t)
	} else {
		srv = providertest.New(t)
	}
	srv.SetDefault(response(p, s))
	f := Fake{URL: srv.URL(), Calls: srv.Calls, Received: func() []Received {
		var out []Received
		for _, r := range srv.Requests() {
			out = append(out, readRequest(t, p, r.Body))
		}
		return out
	}}
	if s.Refused {
		srv.Close() // nothing listens at URL any more
	}
	return f
}

// response is s in providertest's terms.
func response(p Protocol, s Script) providertest.Response {
	r := providertest.Response{
		Text:         s.Text,
		FinishReason: finishReason(p, s.Finish),
		NoUsage:      s.Usage == nil,
		Hang:         s.Hang,
		Reset:        s.Reset,
		NoDone:       s.NoEnd,
		NonStreaming: s.JSON,
	}
	if r.Text == nil {
		r.Text = []string{} // nil would be providertest's default answer
	}
	if s.Usage != nil {
		r.Usage = &providertest.Usage{PromptTokens: s.Usage.Prompt, CompletionTokens: s.Usage.Completion}
	}
	if tc := s.ToolCall; tc != nil {
		r.ToolCall = &providertest.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
	}
	if s.Status != 0 && s.Status != 200 {
		r.Status = s.Status
		if s.ErrorMessage != "" {
			r.Body = errorEnvelope(p, s.ErrorMessage)
		}
		if s.Status == 404 {
			r.Body = notFoundBody(p, s.Missing)
		}
		r.Header = map[string]string{}
		if s.RetryAfter > 0 {
			r.Header["Retry-After"] = strconv.Itoa(int(s.RetryAfter.Seconds()))
		}
		if s.Status >= 300 && s.Status < 400 {
			r.Header["Location"] = providertest.Path
			if p == Messages {
				r.Header["Location"] = providertest.AnthropicPath
			}
		}
	}
	switch s.Cut {
	case NoCut:
	case CutMalformed:
		r.Body, r.Header = malformedBody(p, s)
	default:
		r.Cut = &providertest.Cut{After: s.CutAfter, How: cutModes[s.Cut]}
	}
	return r
}

// cutModes are the suite's cuts as the fake upstream makes them (CutMalformed
// is the suite's own); any other is providertest's CutClose, its zero mode.
var cutModes = map[CutMode]providertest.CutMode{
	CutClose: providertest.CutClose,
	CutAbort: providertest.CutAbort,
	CutReset: providertest.CutReset,
	CutError: providertest.CutError,
	CutStall: providertest.CutStall,
}

// finishReason is f in the protocol's words: Chat Completions' finish_reason
// or Messages' stop_reason.
func finishReason(p Protocol, f Finish) string {
	if p == ChatCompletions {
		return f.ChatCompletions()
	}
	switch f {
	case FinishStopSequence:
		return messages.StopStopSequence
	case FinishLength:
		return messages.StopMaxTokens
	case FinishToolCalls:
		return messages.StopToolUse
	case FinishContentFilter:
		return messages.StopRefusal
	}
	return messages.StopEndTurn
}

// errorEnvelope is the protocol's error body with message msg.
func errorEnvelope(p Protocol, msg string) string {
	if p == Messages {
		return string(mustJSON(messages.Error{Type: messages.TypeError,
			Error: messages.ErrorBody{Type: messages.ErrorType(http.StatusBadRequest), Message: msg}}))
	}
	return string(mustJSON(chat.Error{Error: chat.ErrorBody{Message: msg, Type: chat.ErrorInvalidRequest}}))
}

// notFoundBody is the body of a 404 about what m names, as the protocol's
// provider writes it (Anthropic's Messages; OpenAI's Chat Completions and
// Responses, which share the envelope).
func notFoundBody(p Protocol, m Missing) string {
	if p == Messages {
		msg := "model: " + RouteModel
		if m == MissingReference {
			msg = "File not found: file_011CNha8iCJcU1wXNR6q4V8w"
		}
		requestID := "req_011CVzcontract"
		return string(mustJSON(messages.Error{Type: messages.TypeError, RequestID: &requestID,
			Error: messages.ErrorBody{Type: messages.ErrorType(http.StatusNotFound), Message: msg}}))
	}
	body := chat.ErrorBody{Message: "The model `" + RouteModel + "` does not exist or you do not have access to it.",
		Type: chat.ErrorInvalidRequest}
	if m == MissingReference {
		body.Message = "Conversation with id 'conv_contract' not found."
	} else {
		code := "model_not_found"
		body.Code = &code
	}
	return string(mustJSON(chat.Error{Error: body}))
}

// cutText is the last piece of a malformed answer, whose JSON is cut off
// in its middle.
const cutText = "world"

// cutOff is v's JSON cut off in the middle of the cutText it holds: JSON
// no more.
func cutOff(v any) []byte {
	b := mustJSON(v)
	return b[:bytes.Index(b, []byte(cutText))+len("wor")]
}

// jsonHeader and sseHeader are the headers of a scripted Body.
var (
	jsonHeader = map[string]string{"Content-Type": "application/json"}
	sseHeader  = map[string]string{"Content-Type": "text/event-stream"}
)

// malformedBody is an answer whose opening and first s.CutAfter pieces
// are the protocol's, followed by a piece whose data is cut off in the
// middle of its JSON; with s.JSON, a JSON answer cut off in the middle.
func malformedBody(p Protocol, s Script) (string, map[string]string) {
	if s.JSON {
		text := cutText
		return string(cutOff(chat.Completion{ID: "chatcmpl-malformed", Object: chat.ObjectCompletion, Created: providertest.Created,
			Model: RouteModel, Choices: []chat.Choice{{Message: chat.Message{Role: chat.RoleAssistant, Content: &text}}}})), jsonHeader
	}
	return sseBody(streamStart(p, append(slices.Clip(s.Text[:s.CutAfter]), cutText)), true), sseHeader
}

// event is one event of a stream: its name ("" for none), and the value
// its data is the JSON of.
type event struct {
	name string
	v    any
}

// sseBody is events as a text/event-stream body; with cut, the last
// event's data is cut off (cutOff).
func sseBody(events []event, cut bool) string {
	var b strings.Builder
	for i, e := range events {
		data := mustJSON(e.v)
		if cut && i == len(events)-1 {
			data = cutOff(e.v)
		}
		_ = sse.WriteEvent(&b, e.name, data)
	}
	return b.String()
}

// streamStart is the opening events of a stream in the protocol, and the
// events of pieces.
func streamStart(p Protocol, pieces []string) []event {
	var events []event
	if p == ChatCompletions {
		chunk := func(delta chat.Delta) event {
			return event{"", chat.Chunk{ID: "chatcmpl-malformed", Object: chat.ObjectChunk, Created: providertest.Created,
				Model: RouteModel, Choices: []chat.ChunkChoice{{Delta: delta}}}}
		}
		empty := ""
		events = append(events, chunk(chat.Delta{Role: chat.RoleAssistant, Content: &empty}))
		for _, piece := range pieces {
			events = append(events, chunk(chat.Delta{Content: &piece}))
		}
		return events
	}
	input, output := int64(11), int64(1)
	empty := ""
	events = append(events,
		event{messages.EventMessageStart, messages.MessageStart{Type: messages.EventMessageStart, Message: messages.Message{
			ID: "msg_malformed", Type: messages.TypeMessage, Role: messages.RoleAssistant, Model: RouteModel,
			Content: []messages.ContentBlock{}, Usage: &messages.Usage{InputTokens: &input, OutputTokens: &output}}}},
		event{messages.EventContentBlockStart, messages.ContentBlockStart{Type: messages.EventContentBlockStart,
			ContentBlock: messages.ContentBlock{Type: messages.BlockText, Text: &empty}}})
	for _, piece := range pieces {
		events = append(events, event{messages.EventContentBlockDelta, messages.ContentBlockDelta{Type: messages.EventContentBlockDelta,
			Delta: messages.Delta{Type: messages.DeltaText, Text: &piece}}})
	}
	return events
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("adaptertest: " + err.Error()) // the wire types always encode
	}
	return b
}

// readRequest reads a request body in the protocol's terms: a Chat
// Completions body here (encoding/json matches the untagged fields' keys
// regardless of case), a Messages body with readMessages.
func readRequest(t *testing.T, p Protocol, body []byte) Received {
	t.Helper()
	if p == Messages {
		return readMessages(t, body)
	}
	var req struct {
		Model               string
		Stream              bool
		MaxTokens           *int `json:"max_tokens"`
		MaxCompletionTokens *int `json:"max_completion_tokens"`
		Temperature         *float64
		Stop                json.RawMessage // a string or a list
		Messages            []struct {
			Role    string
			Content json.RawMessage
		}
		Tools []struct {
			Function struct{ Name string }
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("the upstream received a body that is not a request: %v\n%s", err, body)
	}
	r := Received{Body: body, Model: req.Model, Stream: req.Stream, Temperature: req.Temperature}
	switch {
	case req.MaxCompletionTokens != nil:
		r.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		r.MaxTokens = *req.MaxTokens
	}
	if len(req.Stop) > 0 && req.Stop[0] == '"' {
		r.Stop = []string{""}
		_ = json.Unmarshal(req.Stop, &r.Stop[0])
	} else if len(req.Stop) > 0 {
		_ = json.Unmarshal(req.Stop, &r.Stop)
	}
	var system []string
	for _, m := range req.Messages {
		text := contentText(t, m.Content)
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, text)
			continue
		}
		r.Messages = append(r.Messages, Message{Role: m.Role, Text: text})
	}
	r.System = strings.TrimSpace(strings.Join(system, "\n\n"))
	for _, tool := range req.Tools {
		r.Tools = append(r.Tools, tool.Function.Name)
	}
	return r
}

// readMessages reads a Messages request body with pkg/wire/messages'
// Request.
func readMessages(t *testing.T, body []byte) Received {
	t.Helper()
	var req messages.Request
	if err := messages.Unmarshal(body, &req); err != nil {
		t.Fatalf("the upstream received a body that is not a request: %v\n%s", err, body)
	}
	r := Received{Body: body, Model: req.Model, Stream: req.Stream, Stop: req.StopSequences}
	if req.MaxTokens != nil {
		r.MaxTokens = int(*req.MaxTokens)
	}
	if len(req.Temperature) > 0 && string(req.Temperature) != "null" {
		var f float64
		if err := json.Unmarshal(req.Temperature, &f); err != nil {
			t.Fatalf("temperature %s: %v", req.Temperature, err)
		}
		r.Temperature = &f
	}
	r.System = strings.TrimSpace(blocksText(req.System))
	for _, m := range req.Messages {
		r.Messages = append(r.Messages, Message{Role: m.Role, Text: blocksText(m.Content)})
	}
	for _, tool := range req.Tools {
		r.Tools = append(r.Tools, tool.Name)
	}
	return r
}

// blocksText is the text of a Messages content: the string, or the text
// of its text blocks, joined.
func blocksText(c messages.Content) string {
	if c.Blocks == nil {
		return c.Text
	}
	var b strings.Builder
	for _, bl := range c.Blocks {
		if bl.Type == messages.BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// contentText is the text of a content field: a string, or the text of
// its text parts (blocks), joined.
func contentText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return partsText(t, raw, messages.BlockText)
}

// partsText is the text of content that is a string or a list of parts:
// the string, or the text of the parts whose type is one of kinds, joined.
func partsText(t *testing.T, raw json.RawMessage, kinds ...string) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatalf("content %s is neither a string nor a list of parts: %v", raw, err)
	}
	var b strings.Builder
	for _, p := range parts {
		if slices.Contains(kinds, p.Type) {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
