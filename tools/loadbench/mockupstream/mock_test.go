package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/wire/chat"
)

func post(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec
}

func TestCompletionIs448Bytes(t *testing.T) {
	rec := post(t, newHandler(false, 0), `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if n := rec.Body.Len(); n != CompletionSize {
		t.Fatalf("completion is %d bytes, want %d", n, CompletionSize)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var c chat.Completion
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	var u chat.Usage
	if err := json.Unmarshal(c.Usage, &u); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content == "" || u.TotalTokens == 0 {
		t.Fatalf("unexpected completion %+v", c)
	}
}

// streamText parses an SSE body into the concatenated content, whether it
// had a usage chunk, and whether it ended with [DONE].
func streamText(t *testing.T, body string) (text string, usageChunks int, done bool) {
	t.Helper()
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]: %q", body[max(0, len(body)-40):])
	}
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event without data: %q", ev)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *chat.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk object %q", c.Object)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
		}
		if c.Usage != nil {
			usageChunks++
		}
	}
	return text, usageChunks, done
}

func TestStreamIsTheSameText(t *testing.T) {
	for _, tc := range []struct {
		flushEach  bool
		chunkWords int
	}{{false, 0}, {true, 0}, {false, 1}, {true, 3}} {
		flushEach := tc.flushEach
		h := newHandler(flushEach, tc.chunkWords)
		var c chat.Completion
		json.Unmarshal(post(t, h, `{}`).Body.Bytes(), &c)
		want := *c.Choices[0].Message.Content

		rec := post(t, h, `{"stream":true,"stream_options":{"include_usage":true}}`)
		if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("content type %q", ct)
		}
		text, usages, done := streamText(t, rec.Body.String())
		if text != want || usages != 1 || !done {
			t.Errorf("flushEach=%v with usage: text %q (want %q), %d usage chunks, done %v", flushEach, text, want, usages, done)
		}
		text, usages, _ = streamText(t, post(t, h, `{"stream":true}`).Body.String())
		if text != want || usages != 0 {
			t.Errorf("flushEach=%v without usage: text %q, %d usage chunks", flushEach, text, usages)
		}
	}
}

func TestUnknownPathAndBadBody(t *testing.T) {
	h := newHandler(false, 0)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(`{}`)))
	if rec.Code != http.StatusNotFound {
		t.Errorf("unknown path: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{`)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("bad body: %d", rec.Code)
	}
}

func TestChunkWords(t *testing.T) {
	text := answerText()
	n := len(strings.Fields(text))
	for _, tc := range []struct{ chunkWords, events int }{
		{0, 4},           // role, the whole text, finish, [DONE]
		{1, n + 3},       // a chunk per word
		{n, 4},           // all words in one chunk
		{2, (n+1)/2 + 3}, // pairs
		{1 << 20, 4},     // more words than the text has
	} {
		if got := len(sseEvents(text, false, tc.chunkWords)); got != tc.events {
			t.Errorf("chunkWords %d: %d events, want %d", tc.chunkWords, got, tc.events)
		}
	}
}

func TestJSONTrue(t *testing.T) {
	for _, tc := range []struct {
		body          string
		stream, usage bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":128}`, false, false},
		// the generator's and the gateway's (UpstreamBody) streaming bodies
		{`{"model":"m","messages":[],"max_tokens":128,"stream":true,"stream_options":{"include_usage":true}}`, true, true},
		{`{"model":"mock-model","stream":true,"stream_options":{"include_usage":true},"max_tokens":128,"messages":[]}`, true, true},
		{`{"stream" : true, "stream_options": { "include_usage":	true }}`, true, true},
		{`{"stream":true}`, true, false},
		{`{"stream":false,"stream_options":{"include_usage":false}}`, false, false},
		{`{"stream_options":{"include_usage":true}}`, false, true},
		{`{"messages":[{"content":"say \"stream\":true"}]}`, false, false},
		{`{"streamed":true}`, false, false},
		{`{"stream":`, false, false},
	} {
		if got := jsonTrue([]byte(tc.body), "stream"); got != tc.stream {
			t.Errorf("%s: stream %v, want %v", tc.body, got, tc.stream)
		}
		if got := jsonTrue([]byte(tc.body), "include_usage"); got != tc.usage {
			t.Errorf("%s: include_usage %v, want %v", tc.body, got, tc.usage)
		}
	}
}
