package lambdaedge_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/rie"
	"github.com/buzzgate/buzzgate/pkg/lambdaedge"
)

// invokeBuffered runs the buffered handler through the lambda package, as
// the runtime does, and decodes the JSON it sends the way SAM CLI reads it
// (the keys of an API Gateway proxy response, nothing else).
func invokeBuffered(t *testing.T, h http.Handler, ev events.APIGatewayProxyRequest) events.APIGatewayProxyResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewHandler(lambdaedge.WrapBuffered(h)).Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	// SAM CLI's reading of it (internal/rie): a JSON object with only the
	// keys of an API Gateway proxy response.
	if _, err := rie.DecodeBuffered(out); err != nil {
		t.Fatalf("SAM CLI could not read %q: %v", out, err)
	}
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestBufferedStatusHeadersBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_1")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"ok":`)
		http.NewResponseController(w).Flush()
		io.WriteString(w, `true}`)
	})
	got := invokeBuffered(t, h, event(http.MethodPost, "/api/v1/x", "{}"))
	want := events.APIGatewayProxyResponse{
		StatusCode:        201,
		Headers:           map[string]string{"Content-Type": "application/json", "X-Request-Id": "req_1"},
		MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}},
		Body:              `{"ok":true}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestBufferedStream: a server-sent event stream, flushed event by event,
// comes back whole in one body, status and headers as set before the first
// flush.
func TestBufferedStream(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		for _, e := range []string{"data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"} {
			io.WriteString(w, e)
			rc.Flush()
		}
	})
	got := invokeBuffered(t, h, event(http.MethodPost, "/api/v1/chat/completions", "{}"))
	if got.StatusCode != 200 || got.Headers["Content-Type"] != "text/event-stream" || got.Body != "data: 1\n\ndata: 2\n\ndata: [DONE]\n\n" || got.IsBase64Encoded {
		t.Errorf("%+v", got)
	}
}

func TestBufferedSemantics(t *testing.T) {
	t.Run("sniffed content type", func(t *testing.T) {
		got := invokeBuffered(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "<html>hi</html>")
		}), event(http.MethodGet, "/", ""))
		if got.StatusCode != 200 || got.Headers["Content-Type"] != "text/html; charset=utf-8" {
			t.Errorf("%+v", got)
		}
	})
	t.Run("nothing written", func(t *testing.T) {
		got := invokeBuffered(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), event(http.MethodGet, "/", ""))
		if got.StatusCode != 200 || got.Body != "" {
			t.Errorf("%+v", got)
		}
	})
	t.Run("HEAD has no body", func(t *testing.T) {
		got := invokeBuffered(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":1}`)
		}), event(http.MethodHead, "/", ""))
		if got.StatusCode != 200 || got.Body != "" || got.Headers["Content-Type"] != "application/json" {
			t.Errorf("%+v", got)
		}
	})
	t.Run("204 has no body", func(t *testing.T) {
		var werr error
		got := invokeBuffered(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			_, werr = io.WriteString(w, "x")
		}), event(http.MethodDelete, "/", ""))
		if got.StatusCode != 204 || got.Body != "" || werr != http.ErrBodyNotAllowed {
			t.Errorf("%+v, write error %v", got, werr)
		}
	})
	t.Run("informational status dropped, second WriteHeader ignored", func(t *testing.T) {
		got := invokeBuffered(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusAccepted)
			w.WriteHeader(http.StatusTeapot)
		}), event(http.MethodGet, "/", ""))
		if got.StatusCode != 202 {
			t.Errorf("%+v", got)
		}
	})
	t.Run("binary body is base64", func(t *testing.T) {
		raw := []byte{0xff, 0x00, 0xfe, 'a'}
		got := invokeBuffered(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(raw)
		}), event(http.MethodGet, "/", ""))
		dec, err := base64.StdEncoding.DecodeString(got.Body)
		if !got.IsBase64Encoded || err != nil || string(dec) != string(raw) {
			t.Errorf("%+v (%v)", got, err)
		}
	})
	t.Run("request is converted as in streaming mode", func(t *testing.T) {
		ev := event(http.MethodPost, "/api/v1/echo", base64.StdEncoding.EncodeToString([]byte("hello")))
		ev.IsBase64Encoded = true
		ev.QueryStringParameters = map[string]string{"b": "2", "a": "1"}
		got := invokeBuffered(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+r.RemoteAddr+" "+string(body))
		}), ev)
		if got.Body != "POST /api/v1/echo?a=1&b=2 203.0.113.7:0 hello" {
			t.Errorf("%q", got.Body)
		}
	})
}

func TestBufferedBadEvent(t *testing.T) {
	ev := event(http.MethodPost, "/", "not base64!")
	ev.IsBase64Encoded = true
	called := false
	got := invokeBuffered(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }), ev)
	if called || got.StatusCode != http.StatusBadRequest || got.Body != "400 Bad Request" {
		t.Errorf("called %v, %+v", called, got)
	}
}

func TestBufferedPanic(t *testing.T) {
	logs := captureLogs(t)
	got := invokeBuffered(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_2")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"partial":`)
		panic("boom")
	}), event(http.MethodGet, "/", ""))
	if got.StatusCode != 500 || got.Body != "Internal Server Error\n" || got.Headers["Content-Type"] != "text/plain; charset=utf-8" || got.Headers["X-Request-Id"] != "req_2" {
		t.Errorf("%+v", got)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("the panic was not logged: %s", logs.String())
	}
}
