package codexcli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// CreatedAt is the created_at of every scripted response, fixed so that
// streams are deterministic.
const CreatedAt int64 = 1700000000

// Item is one output item of a scripted Responses API answer. Make one with
// Reasoning, FunctionCall or Message.
type Item struct {
	// Type is "reasoning", "function_call" or "message".
	Type string
	// ID is the item's id (rs_…, fc_…, msg_…).
	ID string
	// Summary holds a reasoning item's summary texts, one summary part each.
	Summary []string
	// EncryptedContent is a reasoning item's opaque encrypted_content, which
	// a client that sends "store": false returns with the next request.
	EncryptedContent string
	// CallID, Name and Arguments are a function call's call_id, function name
	// and JSON arguments (a string, as the API sends it).
	CallID, Name, Arguments string
	// Text is an assistant message's output text.
	Text string
}

// Reasoning is a reasoning item carrying encrypted_content, with optional
// summary texts.
func Reasoning(id, encryptedContent string, summary ...string) Item {
	return Item{Type: "reasoning", ID: id, EncryptedContent: encryptedContent, Summary: summary}
}

// FunctionCall is a function_call item: the model asks the client to run
// the function name with the JSON arguments and to answer with a
// function_call_output carrying callID.
func FunctionCall(id, callID, name, arguments string) Item {
	return Item{Type: "function_call", ID: id, CallID: callID, Name: name, Arguments: arguments}
}

// Message is an assistant message with one output_text part.
func Message(id, text string) Item {
	return Item{Type: "message", ID: id, Text: text}
}

// Usage is a response's token counts.
type Usage struct {
	InputTokens, CachedTokens, OutputTokens, ReasoningTokens int
}

// Response scripts one answer of a fake Responses API upstream.
type Response struct {
	// Status, when neither 0 nor 200, makes the answer an OpenAI error
	// envelope with that status instead of a stream.
	Status int
	// ID is the response id; empty means "resp_scripted".
	ID string
	// Model is reported as the response's model; empty means the request's.
	Model string
	// Items are the output items, streamed in order.
	Items []Item
	// Usage is reported by response.completed.
	Usage Usage
}

// Event is one Server-Sent Event of a Responses API stream.
type Event struct {
	// Name is the event field, equal to the data's "type".
	Name string
	// Data is the JSON data.
	Data []byte
}

// WriteTo writes the event in the SSE framing OpenAI uses:
// "event: NAME\ndata: JSON\n\n".
func (e Event) WriteTo(w io.Writer) (int64, error) {
	n, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Name, e.Data)
	return int64(n), err
}

// The wire shapes, with their fields in the order OpenAI sends them.
type (
	wireResponse struct {
		ID                string      `json:"id"`
		Object            string      `json:"object"`
		CreatedAt         int64       `json:"created_at"`
		Status            string      `json:"status"`
		Error             any         `json:"error"`
		IncompleteDetails any         `json:"incomplete_details"`
		Model             string      `json:"model"`
		Output            []any       `json:"output"`
		ParallelToolCalls bool        `json:"parallel_tool_calls"`
		Store             bool        `json:"store"`
		Usage             *wireUsage  `json:"usage"`
		Metadata          struct{}    `json:"metadata"`
		Reasoning         wireSummary `json:"reasoning"`
	}
	wireSummary struct {
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	}
	wireUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	wireReasoning struct {
		ID               string        `json:"id"`
		Type             string        `json:"type"`
		EncryptedContent string        `json:"encrypted_content,omitempty"`
		Summary          []wireSumText `json:"summary"`
	}
	wireSumText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	wireFunctionCall struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		Arguments string `json:"arguments"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
	}
	wireMessage struct {
		ID      string           `json:"id"`
		Type    string           `json:"type"`
		Status  string           `json:"status"`
		Content []wireOutputText `json:"content"`
		Role    string           `json:"role"`
	}
	wireOutputText struct {
		Type        string `json:"type"`
		Annotations []any  `json:"annotations"`
		Logprobs    []any  `json:"logprobs"`
		Text        string `json:"text"`
	}
)

// wire is it as output_item.added (done false) or output_item.done
// (done true) and response.completed carry it. A reasoning item's
// encrypted_content and summary come with output_item.done only.
func (it Item) wire(done bool) any {
	status := "in_progress"
	if done {
		status = "completed"
	}
	switch it.Type {
	case "reasoning":
		r := wireReasoning{ID: it.ID, Type: "reasoning", Summary: []wireSumText{}}
		if done {
			r.EncryptedContent = it.EncryptedContent
			for _, s := range it.Summary {
				r.Summary = append(r.Summary, wireSumText{Type: "summary_text", Text: s})
			}
		}
		return r
	case "function_call":
		f := wireFunctionCall{ID: it.ID, Type: "function_call", Status: status, CallID: it.CallID, Name: it.Name}
		if done {
			f.Arguments = it.Arguments
		}
		return f
	default:
		m := wireMessage{ID: it.ID, Type: "message", Status: status, Content: []wireOutputText{}, Role: "assistant"}
		if done {
			m.Content = append(m.Content, outputText(it.Text))
		}
		return m
	}
}

func outputText(s string) wireOutputText {
	return wireOutputText{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: s}
}

// Events is r's answer to a request for model as the Responses API streams
// it: response.created, response.in_progress, for each item
// response.output_item.added, its deltas (reasoning summary parts and text,
// function call arguments, or a message's content part and text) and
// response.output_item.done, then response.completed with every item and the
// usage. Every event carries its sequence_number, from 0.
func Events(r Response, model string) []Event {
	if r.Model != "" {
		model = r.Model
	}
	id := r.ID
	if id == "" {
		id = "resp_scripted"
	}
	resp := wireResponse{
		ID: id, Object: "response", CreatedAt: CreatedAt, Status: "in_progress",
		Model: model, Output: []any{}, ParallelToolCalls: true,
		Reasoning: wireSummary{Effort: "medium", Summary: "detailed"},
	}
	var events []Event
	add := func(fields ...any) {
		typ := fields[1].(string)
		fields = append(fields, "sequence_number", len(events))
		events = append(events, Event{Name: typ, Data: mustJSON(ordered(fields))})
	}
	add("type", "response.created", "response", resp)
	add("type", "response.in_progress", "response", resp)
	for i, it := range r.Items {
		add("type", "response.output_item.added", "output_index", i, "item", it.wire(false))
		switch it.Type {
		case "reasoning":
			for j, s := range it.Summary {
				part := wireSumText{Type: "summary_text"}
				add("type", "response.reasoning_summary_part.added", "item_id", it.ID, "output_index", i, "summary_index", j, "part", part)
				add("type", "response.reasoning_summary_text.delta", "item_id", it.ID, "output_index", i, "summary_index", j, "delta", s)
				add("type", "response.reasoning_summary_text.done", "item_id", it.ID, "output_index", i, "summary_index", j, "text", s)
				part.Text = s
				add("type", "response.reasoning_summary_part.done", "item_id", it.ID, "output_index", i, "summary_index", j, "part", part)
			}
		case "function_call":
			add("type", "response.function_call_arguments.delta", "item_id", it.ID, "output_index", i, "delta", it.Arguments)
			add("type", "response.function_call_arguments.done", "item_id", it.ID, "output_index", i, "arguments", it.Arguments)
		default:
			add("type", "response.content_part.added", "item_id", it.ID, "output_index", i, "content_index", 0, "part", outputText(""))
			add("type", "response.output_text.delta", "item_id", it.ID, "output_index", i, "content_index", 0, "delta", it.Text, "logprobs", []any{})
			add("type", "response.output_text.done", "item_id", it.ID, "output_index", i, "content_index", 0, "text", it.Text, "logprobs", []any{})
			add("type", "response.content_part.done", "item_id", it.ID, "output_index", i, "content_index", 0, "part", outputText(it.Text))
		}
		add("type", "response.output_item.done", "output_index", i, "item", it.wire(true))
		resp.Output = append(resp.Output, it.wire(true))
	}
	resp.Status = "completed"
	u := &wireUsage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
		TotalTokens: r.Usage.InputTokens + r.Usage.OutputTokens}
	u.InputTokensDetails.CachedTokens = r.Usage.CachedTokens
	u.OutputTokensDetails.ReasoningTokens = r.Usage.ReasoningTokens
	resp.Usage = u
	add("type", "response.completed", "response", resp)
	return events
}

// Stream answers an HTTP request with events as a Responses API stream
// (text/event-stream), flushing after each event.
func Stream(w http.ResponseWriter, events []Event) error {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, e := range events {
		if _, err := e.WriteTo(w); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// WriteError answers with status and an OpenAI error envelope.
func WriteError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	body := ordered{"error", ordered{"message", message, "type", typ, "param", nil, "code", nil}}
	_, _ = w.Write(mustJSON(body))
}

// ordered is a JSON object whose keys keep their order: key, value, key,
// value…
type ordered []any

func (o ordered) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(o[i])
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(o[i+1])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("codexcli: marshal %T: %v", v, err))
	}
	return b
}
