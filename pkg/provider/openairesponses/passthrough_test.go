package openairesponses_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/openairesponses"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// patience bounds a wait that should end at once: a stream that waits for
// the network where it must not waits until the test's end instead.
const patience = 10 * time.Second

// passRequest is a Responses request passed through.
func passRequest(body string, h http.Header) *llm.UpstreamRequest {
	return &llm.UpstreamRequest{Model: "gpt-route", Proto: llm.ProtoResponses, Body: []byte(body), Header: h}
}

const passBody = `{"model":"gpt-route", "input":[{"type":"message","role":"user","content":"Hi"},` +
	`{"type":"reasoning","id":"rs_0","summary":[],"encrypted_content":"gAAAAB=="}],` +
	`"include":["reasoning.encrypted_content"],"store":false,"client_metadata":{"x":1},"stream":true}`

// next is the stream's next chunk, failing the test when Next does not
// return within patience.
func next(t *testing.T, s llm.ChunkStream) (llm.Chunk, error) {
	t.Helper()
	type result struct {
		c   llm.Chunk
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := s.Next()
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-time.After(patience):
		s.Close()
		<-ch
		t.Fatalf("Next did not return within %v", patience)
		return llm.Chunk{}, nil
	}
}

// collect reads a stream to its end.
func collect(t *testing.T, s llm.ChunkStream) ([]llm.Chunk, error) {
	t.Helper()
	var out []llm.Chunk
	for len(out) < 1000 {
		c, err := next(t, s)
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	t.Fatal("no end after 1000 chunks")
	return nil, nil
}

func open(t *testing.T, c *openairesponses.Client, ctx context.Context, req *llm.UpstreamRequest) llm.ChunkStream {
	t.Helper()
	s, err := c.ChatStream(ctx, req)
	if err != nil {
		t.Fatalf("ChatStream: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func providerError(t *testing.T, err error) *llm.ProviderError {
	t.Helper()
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a *llm.ProviderError", err, err)
	}
	return pe
}

// wireStream is a Responses stream as a server writes it, with the
// oddities a reader must keep byte for byte: spacing, a member order of its
// own, unknown members, escapes, and an event without a name; a comment
// and an empty event in between carry nothing.
var wireEvents = []struct{ name, data string }{
	{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_7","object":"response","created_at":1700000007,"status":"in_progress","model":"gpt-5-2025","output":[],"usage":null,"x_vendor":{"a":[1,2]}}}`},
	{"response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_7","status":"in_progress"}}`},
	{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_7","type":"reasoning","summary":[]}}`},
	{"response.output_item.done", `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_7","type":"reasoning","summary":[],"encrypted_content":"gAAAAB7=="}}`},
	{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"msg_7","type":"message","status":"in_progress","content":[],"role":"assistant"}}`},
	{"", `{"sequence_number":5,"type":"response.content_part.added","item_id":"msg_7","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}`},
	{"response.output_text.delta", `{"type": "response.output_text.delta",  "sequence_number":6, "item_id":"msg_7","output_index":1,"content_index":0,"delta":"Bl\u00e9u <b>","logprobs":[]}`},
	{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_7","output_index":1,"content_index":0,"delta":".","obfuscation":"xyz"}`},
	{"response.output_text.done", `{"type":"response.output_text.done","sequence_number":8,"item_id":"msg_7","output_index":1,"content_index":0,"text":"Bléu <b>."}`},
	{"response.output_item.done", `{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"msg_7","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Bléu <b>."}],"role":"assistant"}}`},
	{"response.completed", `{"type":"response.completed","sequence_number":10,"response":{"id":"resp_7","object":"response","created_at":1700000007,"status":"completed","model":"gpt-5-2025","output":[],"usage":{"input_tokens":21,"input_tokens_details":{"cached_tokens":16},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":35},"total_tokens":61}}}`},
}

func wireStream() string {
	var b strings.Builder
	for i, e := range wireEvents {
		if e.name != "" {
			b.WriteString("event: " + e.name + "\n")
		}
		b.WriteString("data: " + e.data + "\n\n")
		if i == 3 {
			b.WriteString(": keep-alive\n\ndata: \n\n")
		}
	}
	return b.String()
}

// recordingUpstream serves body as an event stream to every call and
// records the requests; with hold, it keeps the connection open after the
// body until the client goes (no end of body after the terminal event).
func recordingUpstream(t *testing.T, body string, hold bool) (url string, requests func() []*http.Request, bodies func() []string) {
	t.Helper()
	var (
		mu   sync.Mutex
		reqs []*http.Request
		bs   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs, bs = append(reqs, r), append(bs, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
		http.NewResponseController(w).Flush()
		if hold {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", func() []*http.Request {
			mu.Lock()
			defer mu.Unlock()
			return append([]*http.Request(nil), reqs...)
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), bs...)
		}
}

// TestPassThroughRequest: the body goes out byte for byte, to /responses,
// with the adapter's own headers and the forwarded ones, never a forwarded
// header of the adapter's own.
func TestPassThroughRequest(t *testing.T) {
	url, requests, bodies := recordingUpstream(t, wireStream(), false)
	c := openairesponses.New("resp", url+"/", "sk-upstream", nil)
	h := http.Header{
		"Openai-Beta":     {"responses=v1"},
		"Authorization":   {"Bearer sk-client"},
		"Idempotency-Key": {"k-1"},
		"Content-Length":  {"1"},
		"Accept":          {"application/json"},
	}
	s := open(t, c, t.Context(), passRequest(passBody, h))
	if _, err := collect(t, s); err != io.EOF {
		t.Fatalf("end %v, want io.EOF", err)
	}
	reqs := requests()
	if len(reqs) != 1 {
		t.Fatalf("the upstream received %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if got := bodies()[0]; got != passBody {
		t.Errorf("the upstream received\n%s\nwant the body as given\n%s", got, passBody)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		t.Errorf("%s %s, want POST /v1/responses", r.Method, r.URL.Path)
	}
	want := map[string]string{
		"Authorization": "Bearer sk-upstream", "Accept": "text/event-stream", "Content-Type": "application/json",
		"Openai-Beta": "responses=v1", "Idempotency-Key": "", "Content-Length": "",
	}
	for k, v := range want {
		if got := r.Header.Get(k); got != v && !(k == "Content-Length" && got != "1") {
			t.Errorf("header %s: %q, want %q", k, got, v)
		}
	}
	if got := r.Header.Values("Authorization"); len(got) != 1 {
		t.Errorf("Authorization %q, want the adapter's only", got)
	}

	// Without a key, no Authorization at all.
	c = openairesponses.New("resp", url, "", nil)
	s = open(t, c, t.Context(), passRequest(passBody, nil))
	if _, err := collect(t, s); err != io.EOF {
		t.Fatalf("end %v, want io.EOF", err)
	}
	if got := requests()[1].Header.Values("Authorization"); got != nil {
		t.Errorf("Authorization %q without a key", got)
	}
}

// TestPassThroughEvents: every event comes back as one chunk, its name and
// data as received, with what the router reads of it; the stream ends at
// the terminal event, without waiting for the body's end.
func TestPassThroughEvents(t *testing.T) {
	url, _, _ := recordingUpstream(t, wireStream(), true)
	c := openairesponses.New("resp", url, "sk", nil)
	s := open(t, c, t.Context(), passRequest(passBody, nil))
	type got struct {
		Event, Raw     string
		Output         bool
		Text           string
		Finish         string
		Usage          *llm.Usage
		ID, Mo         string
		Seen, Finished uint64
	}
	var chunks []got
	for range wireEvents {
		ch, err := next(t, s)
		if err != nil {
			t.Fatalf("after %d chunks: %v", len(chunks), err)
		}
		if ch.Proto != llm.ProtoResponses {
			t.Errorf("chunk %d: Proto %v", len(chunks), ch.Proto)
		}
		chunks = append(chunks, got{ch.Event, string(ch.Raw), ch.Output, ch.Text, ch.FinishReason, ch.Usage, ch.ID, ch.Model, ch.Seen, ch.Finished})
	}
	// The stream ends at the terminal event, with the connection still open.
	if _, err := next(t, s); err != io.EOF {
		t.Fatalf("after the terminal event: %v, want io.EOF", err)
	}
	if _, err := next(t, s); err != io.EOF {
		t.Errorf("again: %v, want io.EOF", err)
	}
	var want []got
	for i, e := range wireEvents {
		name := e.name
		if name == "" {
			name = "response.content_part.added" // the data's type
		}
		g := got{Event: name, Raw: e.data, ID: "resp_7", Mo: "gpt-5-2025"}
		switch i {
		case 3, 9: // the reasoning item, done with its encrypted content; the message, done with its text
			g.Output = true
		case 6:
			g.Output, g.Text = true, "Bl\u00e9u <b>"
		case 7:
			g.Output, g.Text = true, "."
		case 10:
			g.Seen, g.Finished = 1, 1
			g.Usage = llm.ReadUsage([]byte(`{"prompt_tokens":21,"completion_tokens":40,"total_tokens":61,"prompt_tokens_details":{"cached_tokens":16},"completion_tokens_details":{"reasoning_tokens":35}}`))
		}
		want = append(want, g)
	}
	if diff := cmp.Diff(want, chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestPassThroughAgainstFake: the fake upstream's answers, passed through:
// the first output where the router must fix the provider, and the end.
func TestPassThroughAgainstFake(t *testing.T) {
	tests := []struct {
		name        string
		resp        providertest.Response
		firstOutput string // the event of the first chunk with Output
		end         string // the terminal event, the one chunk Finished
		usage       string
	}{
		{"reasoning summary, then text", providertest.Response{Responses: &providertest.ResponsesAnswer{Reasoning: []string{"Hmm"}, CachedTokens: 2, ReasoningTokens: 1}},
			"response.reasoning_summary_text.delta", "response.completed",
			`{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}`},
		{"encrypted reasoning only, then text", providertest.Response{Responses: &providertest.ResponsesAnswer{EncryptedContent: "gAAA"}},
			"response.output_item.done", "response.completed",
			`{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`},
		{"a function call", providertest.Response{ToolCall: &providertest.ToolCall{Name: "f", Arguments: `{"a":1}`}, Usage: &providertest.Usage{PromptTokens: 5, CompletionTokens: 6}},
			"response.output_item.added", "response.completed",
			`{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`},
		{"a refusal", providertest.Response{Refusal: "No.", NoUsage: true}, "response.refusal.delta", "response.completed", ""},
		{"an empty answer", providertest.Response{Text: []string{}, NoUsage: true}, "", "response.completed", ""},
		{"incomplete", providertest.Response{FinishReason: "length", NoUsage: true}, "response.output_text.delta", "response.incomplete", ""},
		{"a JSON answer", providertest.Response{NonStreaming: true, Usage: &providertest.Usage{PromptTokens: 3, CompletionTokens: 4}},
			"response.output_text.delta", "response.completed",
			`{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := providertest.NewResponses(t)
			up.SetDefault(tt.resp)
			s := open(t, openairesponses.New("resp", up.URL(), "sk", nil), t.Context(), passRequest(`{"model":"gpt-route","input":"Hi","stream":true}`, nil))
			chunks, err := collect(t, s)
			if err != io.EOF {
				t.Fatalf("end %v after %d chunks, want io.EOF", err, len(chunks))
			}
			first := ""
			for _, c := range chunks {
				if c.Output {
					first = c.Event
					break
				}
			}
			last := chunks[len(chunks)-1]
			if first != tt.firstOutput || last.Event != tt.end || last.Finished != 1 || !reflect.DeepEqual(last.Usage, llm.ReadUsage([]byte(tt.usage))) {
				t.Errorf("first output %q, end %q finished %b, usage %+v; want %q, %q finished, %s", first, last.Event, last.Finished, last.Usage, tt.firstOutput, tt.end, tt.usage)
			}
			for i, c := range chunks {
				if c.FinishReason != "" {
					t.Errorf("chunk %d (%s): finish_reason %q on an event passed through", i, c.Event, c.FinishReason)
				}
			}
			for i, c := range chunks[:len(chunks)-1] {
				if c.Finished != 0 || c.Usage != nil {
					t.Errorf("chunk %d (%s): finished %b, usage %+v before the end", i, c.Event, c.Finished, c.Usage)
				}
			}
			if up.Calls() != 1 {
				t.Errorf("%d calls, want 1", up.Calls())
			}
		})
	}
}

// TestPassThroughJSONAnswer: a Response object answering a streaming
// request comes back as the events it would have streamed.
func TestPassThroughJSONAnswer(t *testing.T) {
	up := providertest.NewResponses(t)
	up.SetDefault(providertest.Response{NonStreaming: true, Text: []string{"Hi", " there"},
		Responses: &providertest.ResponsesAnswer{Reasoning: []string{"Think"}, EncryptedContent: "gAAA"}})
	s := open(t, openairesponses.New("resp", up.URL(), "sk", nil), t.Context(), passRequest(`{"model":"m","input":"Hi","stream":true}`, nil))
	chunks, err := collect(t, s)
	if err != io.EOF {
		t.Fatalf("end %v", err)
	}
	var names []string
	for _, c := range chunks {
		names = append(names, c.Event)
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.completed",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(chunks[10].Raw), `"delta":"Hi there"`) || !chunks[10].Output || !chunks[4].Output {
		t.Errorf("the deltas: %s (Output %v), %s (Output %v)", chunks[10].Raw, chunks[10].Output, chunks[4].Raw, chunks[4].Output)
	}
	if created := string(chunks[0].Raw); !strings.Contains(created, `"status":"in_progress"`) || !strings.Contains(created, `"output":[]`) || !strings.Contains(created, `"usage":null`) {
		t.Errorf("response.created %s: want the Response in progress, without output or usage", created)
	}
	if end := string(chunks[len(chunks)-1].Raw); !strings.Contains(end, `"encrypted_content":"gAAA"`) || !strings.Contains(end, `"text":"Hi there"`) {
		t.Errorf("response.completed %s: want the whole Response", end)
	}
}

// TestPassThroughFailures: each way a stream fails.
func TestPassThroughFailures(t *testing.T) {
	tests := []struct {
		name    string
		resp    providertest.Response
		cut     bool   // ends with llm.ErrStreamCut
		message string // else a transient failure with this message
		usage   string // UsageSoFar at the end
	}{
		{"response.failed", providertest.Response{FinishReason: "failed"}, false, "scripted failure",
			`{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`},
		{"an error event", providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutError}}, false, "scripted mid-stream error", ""},
		{"an error event before output", providertest.Response{Cut: &providertest.Cut{After: 0, How: providertest.CutError}}, false, "scripted mid-stream error", ""},
		{"closed", providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutClose}}, true, "", ""},
		{"aborted", providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutAbort}}, true, "", ""},
		{"reset", providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutReset}}, false, "upstream connection broken", ""},
		{"no terminal event", providertest.Response{NoDone: true}, true, "", ""},
		{"a malformed event", providertest.Response{Header: map[string]string{"Content-Type": "text/event-stream"},
			Body: "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"wor\n\n"},
			false, "malformed upstream event", ""},
		{"[DONE] before the terminal event", providertest.Response{Header: map[string]string{"Content-Type": "text/event-stream"},
			Body: "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\ndata: [DONE]\n\n"}, true, "", ""},
		{"a JSON answer that did not end", providertest.Response{Body: `{"id":"resp_1","object":"response","status":"in_progress","output":[]}`}, true, "", ""},
		{"a malformed JSON answer", providertest.Response{Body: `{"id":"resp_1","object":"response","status":"comp`}, false, "malformed upstream answer", ""},
		{"a JSON error", providertest.Response{Body: `{"error":{"message":"Bad things","type":"server_error"}}`}, false, "Bad things", ""},
		{"a failed JSON answer", providertest.Response{Body: `{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"It broke"},"output":[]}`}, false, "It broke", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := providertest.NewResponses(t)
			up.SetDefault(tt.resp)
			s := open(t, openairesponses.New("resp", up.URL(), "sk", nil), t.Context(), passRequest(`{"model":"m","input":"Hi","stream":true}`, nil))
			chunks, err := collect(t, s)
			if tt.cut {
				if !errors.Is(err, llm.ErrStreamCut) {
					t.Fatalf("end %v after %d chunks, want llm.ErrStreamCut", err, len(chunks))
				}
			} else if pe := providerError(t, err); pe.Class != llm.FailTransient || pe.Message != tt.message {
				t.Fatalf("end %v, want a transient failure %q", pe, tt.message)
			}
			if _, again := next(t, s); again != err {
				t.Errorf("Next again: %v, want %v", again, err)
			}
			for i, c := range chunks {
				if c.Finished != 0 || c.FinishReason != "" {
					t.Errorf("chunk %d (%s): finished %b (finish %q) in a stream that failed", i, c.Event, c.Finished, c.FinishReason)
				}
			}
			if got := s.Report().Usage; !reflect.DeepEqual(got, llm.ReadUsage([]byte(tt.usage))) {
				t.Errorf("UsageSoFar %+v, want %s", got, tt.usage)
			}
			if up.Calls() != 1 {
				t.Errorf("%d calls, want 1", up.Calls())
			}
		})
	}
}

// TestStatusFailures: a status other than 200 fails the call before any
// stream, in either mode, classified as the router acts on it.
func TestStatusFailures(t *testing.T) {
	tests := []struct {
		status     int
		header     map[string]string
		body       string
		class      llm.FailureClass
		message    string
		retryAfter time.Duration
	}{
		{400, nil, `{"error":{"message":"Unsupported parameter: 'foo'.","type":"invalid_request_error","param":"foo","code":"unsupported_parameter"}}`, llm.FailRejected, "Unsupported parameter: 'foo'.", 0},
		{429, map[string]string{"Retry-After": "3"}, "", llm.FailThrottled, "upstream status 429", 3 * time.Second},
		{429, map[string]string{"Retry-After-Ms": "1500"}, "", llm.FailThrottled, "upstream status 429", 1500 * time.Millisecond},
		{500, nil, "", llm.FailTransient, "upstream status 500", 0},
		{503, nil, "", llm.FailTransient, "upstream status 503", 0},
		{401, nil, "", llm.FailConfig, "upstream status 401", 0},
		{404, nil, "", llm.FailConfig, "upstream status 404", 0},
		{404, nil, `{"error":{"message":"The model ` + "`m`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, llm.FailConfig, "upstream status 404", 0},
		{404, nil, `{"error":{"message":"Conversation with id 'conv_x' not found.","type":"invalid_request_error","param":null,"code":null}}`, llm.FailRejected, "Conversation with id 'conv_x' not found.", 0},
		{404, nil, `{"error":{"message":"Item with id 'msg_x' not found.","type":"invalid_request_error","param":"input","code":null}}`, llm.FailRejected, "Item with id 'msg_x' not found.", 0},
	}
	for _, mode := range []struct {
		name string
		req  *llm.UpstreamRequest
	}{
		{"passed through", passRequest(`{"model":"m","input":"Hi","stream":true}`, nil)},
		{"translated", &llm.UpstreamRequest{Model: "m", Body: []byte(chatBody(""))}},
	} {
		for _, tt := range tests {
			up := providertest.NewResponses(t)
			up.SetDefault(providertest.Response{Status: tt.status, Header: tt.header, Body: tt.body})
			s, err := openairesponses.New("resp", up.URL(), "sk", nil).ChatStream(t.Context(), mode.req)
			if s != nil {
				s.Close()
				t.Fatalf("%s, status %d: a stream", mode.name, tt.status)
			}
			pe := providerError(t, err)
			if pe.Class != tt.class || pe.Status != tt.status || pe.Message != tt.message || pe.RetryAfter != tt.retryAfter {
				t.Errorf("%s, status %d: %v (class %v, retry after %v), want class %v, message %q, retry after %v",
					mode.name, tt.status, pe, pe.Class, pe.RetryAfter, tt.class, tt.message, tt.retryAfter)
			}
			if up.Calls() != 1 {
				t.Errorf("%s, status %d: %d calls, want 1", mode.name, tt.status, up.Calls())
			}
		}
	}
}

// TestConnectionFailures: no answer at all, and a base URL that cannot be
// used, are transient failures without a status.
func TestConnectionFailures(t *testing.T) {
	up := providertest.NewResponses(t)
	url := up.URL()
	up.Close()
	for _, c := range []*openairesponses.Client{
		openairesponses.New("resp", url, "sk", nil),
		openairesponses.New("resp", "ftp://example.com/v1", "sk", nil),
	} {
		s, err := c.ChatStream(t.Context(), passRequest(`{"model":"m","input":"Hi","stream":true}`, nil))
		if s != nil {
			s.Close()
			t.Fatal("a stream")
		}
		if pe := providerError(t, err); pe.Class != llm.FailTransient || pe.Status != 0 {
			t.Errorf("%v, want a transient failure without status", pe)
		}
	}
	up = providertest.NewResponses(t)
	up.SetDefault(providertest.Response{Reset: true})
	_, err := openairesponses.New("resp", up.URL(), "sk", nil).ChatStream(t.Context(), passRequest(`{"model":"m","input":"Hi","stream":true}`, nil))
	if pe := providerError(t, err); pe.Class != llm.FailTransient || pe.Message != "connection failed" {
		t.Errorf("reset: %v, want a transient connection failure", pe)
	}
	if up.Calls() != 1 {
		t.Errorf("reset: %d calls, want 1", up.Calls())
	}
}

// TestRefusedWithoutCall: a Chat Completions request Responses cannot
// express fails before any call.
func TestRefusedWithoutCall(t *testing.T) {
	up := providertest.NewResponses(t)
	_, err := openairesponses.New("resp", up.URL(), "sk", nil).ChatStream(t.Context(), &llm.UpstreamRequest{Model: "m", Body: []byte(chatBody(`"stop":["END"]`))})
	if pe := providerError(t, err); pe.Class != llm.FailRejected || !strings.Contains(pe.Message, "stop") {
		t.Errorf("%v, want a refusal naming stop", pe)
	}
	_, err = openairesponses.New("resp", up.URL(), "sk", nil).ChatStream(t.Context(), &llm.UpstreamRequest{Model: "m", Proto: llm.ProtoMessages, Body: []byte(`{}`)})
	if pe := providerError(t, err); pe.Class != llm.FailTransient {
		t.Errorf("a Messages body: %v, want a transient failure (another route may take it)", pe)
	}
	if up.Calls() != 0 {
		t.Errorf("%d calls, want none", up.Calls())
	}
}

// TestContextAndClose: the caller's context ending, or Close, ends a Next
// that waits, with an error that is not the provider's.
func TestContextAndClose(t *testing.T) {
	stall := providertest.Response{Cut: &providertest.Cut{After: 1, How: providertest.CutStall}}
	t.Run("cancel", func(t *testing.T) {
		up := providertest.NewResponses(t)
		up.SetDefault(stall)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s := open(t, openairesponses.New("resp", up.URL(), "sk", nil), ctx, passRequest(`{"model":"m","input":"Hi","stream":true}`, nil))
		readUntilOutput(t, s)
		done := make(chan error, 1)
		go func() {
			for {
				if _, err := s.Next(); err != nil {
					done <- err
					return
				}
			}
		}()
		cancel()
		select {
		case err := <-done:
			var pe *llm.ProviderError
			if !errors.Is(err, context.Canceled) || errors.As(err, &pe) {
				t.Errorf("%v, want the context's error, not a provider's", err)
			}
		case <-time.After(patience):
			t.Fatal("Next did not return after the context ended")
		}
	})
	t.Run("close", func(t *testing.T) {
		up := providertest.NewResponses(t)
		up.SetDefault(stall)
		s := open(t, openairesponses.New("resp", up.URL(), "sk", nil), t.Context(), &llm.UpstreamRequest{Model: "m", Body: []byte(chatBody(""))})
		readUntilOutput(t, s)
		done := make(chan error, 1)
		go func() {
			for {
				if _, err := s.Next(); err != nil {
					done <- err
					return
				}
			}
		}()
		first, second := s.Close(), s.Close()
		if first != second {
			t.Errorf("Close: %v, then %v", first, second)
		}
		select {
		case err := <-done:
			var pe *llm.ProviderError
			if !errors.Is(err, openairesponses.ErrClosed) || errors.As(err, &pe) || err == io.EOF {
				t.Errorf("%v, want ErrClosed", err)
			}
		case <-time.After(patience):
			t.Fatal("Next did not return after Close")
		}
	})
	t.Run("canceled before the call", func(t *testing.T) {
		up := providertest.NewResponses(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		s, err := openairesponses.New("resp", up.URL(), "sk", nil).ChatStream(ctx, passRequest(`{"model":"m","input":"Hi","stream":true}`, nil))
		var pe *llm.ProviderError
		if s != nil || !errors.Is(err, context.Canceled) || errors.As(err, &pe) {
			t.Errorf("stream %v, error %v: want only the context's error", s, err)
		}
		if up.Calls() != 0 {
			t.Errorf("%d calls, want none", up.Calls())
		}
	})
}

// readUntilOutput reads up to the first chunk with output.
func readUntilOutput(t *testing.T, s llm.ChunkStream) {
	t.Helper()
	for {
		c, err := next(t, s)
		if err != nil {
			t.Fatalf("before any output: %v", err)
		}
		if c.Output {
			return
		}
	}
}

// chatBody is a Chat Completions body with the messages of one user turn
// and extra top-level members (JSON, after a comma) as the gateway hands
// it to the adapter.
func chatBody(extra string) string {
	b := `{"model":"client-model","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}
