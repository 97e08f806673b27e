package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// routesConfig is a gateway with one simulated provider, a model whose id
// has a slash, and one project with one key.
const routesConfig = `
providers:
  - name: sim
    api: simulated
    simulated: {words: 3}
models:
  - id: vendor/chat
    routes:
      - {provider: sim, model: sim-1, input_price: 1, output_price: 2}
projects:
  - id: p
    keys:
      - key: sk-routes-1
      - key: sk-routes-2
`

const (
	routesKey      = "sk-routes-1"
	routesOtherKey = "sk-routes-2"
)

func routesHandler(t testing.TB) http.Handler {
	t.Helper()
	cfg, err := catalog.Parse([]byte(routesConfig))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a.Handler
}

// answer is what a test reads of a response: its status, the headers that
// routing sets, and the error envelope's fields when there is one.
type answer struct {
	status      int
	contentType string
	allow       string
	vary        string
	body        string
	// anthropic: the body is Anthropic's error envelope
	// ({"type":"error","error":{...}}), not OpenAI's ({"error":{...}}).
	anthropic bool
	code      string
	message   string
}

func serve(h http.Handler, method, target, body string, header ...string) answer {
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := answer{status: w.Code, contentType: w.Header().Get("Content-Type"), allow: w.Header().Get("Allow"),
		vary: w.Header().Get("Vary"), body: w.Body.String()}
	var e struct {
		Type  string
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(w.Body.Bytes(), &e) == nil {
		a.anthropic, a.code, a.message = e.Type == "error", e.Error.Code, e.Error.Message
	}
	return a
}

// route is one endpoint: its methods, the envelope its errors use, and
// what a request it serves gets (with a key, and body on POST).
type route struct {
	path  string
	allow []string
	// anthropic: its 404 and 405 are in Anthropic's envelope.
	anthropic bool
	body      string
	// What the endpoint itself answers: its status, its content type and
	// its error code, if it is an error.
	status      int
	contentType string
	code        string
}

var routes = []route{
	{path: "/api/v1/chat/completions", allow: []string{"POST"}, body: `{"model":"vendor/chat","messages":[{"role":"user","content":"hi"}]}`,
		status: 200, contentType: "application/json"},
	{path: "/api/v1/messages", allow: []string{"POST"}, anthropic: true, body: `{"model":"vendor/chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		status: 200, contentType: "application/json"},
	{path: "/api/v1/messages/count_tokens", allow: []string{"POST"}, anthropic: true, body: `{"model":"vendor/chat","messages":[{"role":"user","content":"hi"}]}`,
		status: 200, contentType: "application/json"},
	{path: "/api/v1/responses", allow: []string{"POST"}, body: `{"model":"vendor/chat","input":"hi"}`,
		status: 200, contentType: "application/json"},
	// Not kept: the endpoint's own 404, not the router's.
	{path: "/api/v1/responses/resp_nope", allow: []string{"GET"},
		status: 404, contentType: "application/json", code: "not_found"},
	// The request id is the gateway's, not a caller's: the endpoint's own
	// 404, on request_id.
	{path: "/api/v1/feedback", allow: []string{"POST"}, body: `{"request_id":"req_nope","end_user":"u"}`,
		status: 404, contentType: "application/json", code: "not_found"},
	{path: "/api/v1/usage", allow: []string{"GET"},
		status: 200, contentType: "application/json"},
	{path: "/api/v1/models", allow: []string{"GET", "HEAD"},
		status: 200, contentType: "application/json"},
	{path: "/api/v1/models/vendor/chat", allow: []string{"GET", "HEAD"},
		status: 200, contentType: "application/json"},
	{path: "/api/v1/models/vendor%2Fchat", allow: []string{"GET", "HEAD"},
		status: 200, contentType: "application/json"},
	{path: "/api/v1/models/nope", allow: []string{"GET", "HEAD"},
		status: 404, contentType: "application/json", code: "model_not_found"},
	// The list's trailing slash is a model id, the empty one.
	{path: "/api/v1/models/", allow: []string{"GET", "HEAD"},
		status: 404, contentType: "application/json", code: "model_not_found"},
}

var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "BREW"}

// Every route answers every method: the ones it serves reach its handler
// (with a key), the others are a 405 in the route's envelope with an Allow
// header, before the key is looked at. A query changes neither.
func TestRoutesMethods(t *testing.T) {
	h := routesHandler(t)
	for _, rt := range routes {
		for _, m := range methods {
			for _, query := range []string{"", "?beta=true&x=%ZZ"} {
				name := m + " " + rt.path + query
				if slices.Contains(rt.allow, m) {
					var body string
					if m == "POST" {
						body = rt.body
					}
					a := serve(h, m, rt.path+query, body, "Authorization", "Bearer "+routesKey)
					if a.status != rt.status || a.contentType != rt.contentType || a.code != rt.code || a.allow != "" {
						t.Errorf("%s: %d %q code %q Allow %q, want %d %q code %q, no Allow\n%s", name, a.status, a.contentType, a.code, a.allow, rt.status, rt.contentType, rt.code, a.body)
					}
					if strings.Contains(a.message, "no such endpoint") {
						t.Errorf("%s: the router's 404: %s", name, a.body)
					}
					continue
				}
				want := strings.Join(rt.allow, ", ")
				a := serve(h, m, rt.path+query, "")
				if a.status != 405 || a.contentType != "application/json" || a.code != "method_not_allowed" || a.allow != want ||
					a.anthropic != rt.anthropic || a.message != "method not allowed; use "+want {
					t.Errorf("%s: %d %q code %q Allow %q anthropic %v, want 405 method_not_allowed Allow %q anthropic %v\n%s",
						name, a.status, a.contentType, a.code, a.allow, a.anthropic, want, rt.anthropic, a.body)
				}
			}
		}
	}
}

// The models endpoints answer in Anthropic's shapes to a client that
// sends anthropic-version, its errors too, and say that they vary by it.
func TestRoutesModelsAnthropic(t *testing.T) {
	h := routesHandler(t)
	av := []string{"Anthropic-Version", "2023-06-01"}
	for _, c := range []struct {
		method, path string
		key          bool
		status       int
		code, allow  string
	}{
		{"GET", "/api/v1/models", true, 200, "", ""},
		{"HEAD", "/api/v1/models", true, 200, "", ""},
		{"GET", "/api/v1/models?limit=1&beta=true", true, 200, "", ""},
		{"GET", "/api/v1/models?limit=0", true, 400, "invalid_request", ""},
		{"GET", "/api/v1/models/vendor/chat", true, 200, "", ""},
		{"GET", "/api/v1/models/nope", true, 404, "model_not_found", ""},
		{"GET", "/api/v1/models", false, 401, "invalid_api_key", ""},
		{"DELETE", "/api/v1/models", false, 405, "method_not_allowed", "GET, HEAD"},
		{"POST", "/api/v1/models/vendor/chat", false, 405, "method_not_allowed", "GET, HEAD"},
	} {
		header := av
		if c.key {
			header = append(slices.Clip(av), "X-Api-Key", routesKey)
		}
		a := serve(h, c.method, c.path, "", header...)
		if a.status != c.status || a.code != c.code || a.allow != c.allow || a.vary != "Anthropic-Version" || a.anthropic != (c.code != "") {
			t.Errorf("%s %s: %d code %q Allow %q Vary %q anthropic %v, want %d %q %q\n%s", c.method, c.path, a.status, a.code, a.allow, a.vary, a.anthropic, c.status, c.code, c.allow, a.body)
		}
		if c.status == 200 && c.method == "GET" && !strings.Contains(a.body, `"display_name":"vendor/chat"`) {
			t.Errorf("%s %s: not Anthropic's shape: %s", c.method, c.path, a.body)
		}
	}
	// Without the header, OpenAI's: the Vary header all the same.
	if a := serve(h, "DELETE", "/api/v1/models/vendor/chat", ""); a.status != 405 || a.anthropic || a.vary != "Anthropic-Version" {
		t.Errorf("DELETE without anthropic-version: %d anthropic %v Vary %q\n%s", a.status, a.anthropic, a.vary, a.body)
	}
}

// A path that is no endpoint is a 404 not_found for any method, key or
// none: in Anthropic's envelope under the Messages API's prefix, in
// OpenAI's elsewhere. A trailing slash, a doubled or dotted segment or
// another case is another path; an escaped slash is a slash.
func TestRoutesNotFound(t *testing.T) {
	h := routesHandler(t)
	for _, c := range []struct {
		path      string
		anthropic bool
	}{
		{"/", false},
		{"/api", false},
		{"/api/v1", false},
		{"/api/v1/", false},
		{"/api/v1/nope", false},
		{"/api/v2/chat/completions", false},
		{"/API/v1/chat/completions", false},
		{"/api/v1/chat/completions/", false},
		{"/api/v1/chat/completions/x", false},
		{"/api/v1/chat", false},
		{"/api/v1//chat/completions", false},
		{"//api/v1/chat/completions", false},
		{"/api/v1/./chat/completions", false},
		{"/api/v1/x/../chat/completions", false},
		{"/api/v1/chat/completions/.", false},
		{"/api/v1/responses/", false},
		{"/api/v1/responses/x/y", false},
		{"/api/v1/usage/", false},
		{"/api/v1/feedback/", false},
		{"/api/v1/modelsx", false},
		{"/api/v1/models/../usage", false},
		{"/api/v1/models//vendor/chat", false},
		{"/api/v1/metrics", false},
		{"/healthz/", false},
		{"/healthz/x", false},
		{"/api/v1/messages/", true},
		{"/api/v1/messages/nope", true},
		{"/api/v1/messages/count_tokens/", true},
		{"/api/v1/messages//count_tokens", true},
		{"/api/v1/messages/./count_tokens", true},
		{"/api/v1/messages/batches", true},
	} {
		for _, m := range []string{"GET", "HEAD", "POST", "DELETE"} {
			for _, key := range [][]string{nil, {"Authorization", "Bearer " + routesKey}} {
				a := serve(h, m, c.path, "", key...)
				code := "not_found"
				if strings.HasPrefix(c.path, "/api/v1/models/") {
					// Under the models prefix, any rest is a model id
					// (after the key): none has such an id.
					code = "model_not_found"
					if key == nil {
						code = "invalid_api_key"
					}
					if m == "POST" || m == "DELETE" {
						code = "method_not_allowed"
					}
				}
				if strings.HasPrefix(c.path, "/api/v1/responses/") {
					// Under the responses prefix, any rest is a
					// response id (after the key).
					code = "not_found"
					if key == nil {
						code = "invalid_api_key"
					}
					if m != "GET" {
						code = "method_not_allowed"
					}
				}
				if a.code != code || a.anthropic != c.anthropic || a.contentType != "application/json" {
					t.Errorf("%s %s (key %v): %d code %q anthropic %v, want %s anthropic %v\n%s", m, c.path, key != nil, a.status, a.code, a.anthropic, code, c.anthropic, a.body)
				}
				if code == "not_found" && !strings.HasPrefix(c.path, "/api/v1/responses/") && (a.status != 404 || a.allow != "" ||
					a.message != "no such endpoint: "+m+" "+c.path) {
					t.Errorf("%s %s: %d Allow %q %q, want 404 no such endpoint", m, c.path, a.status, a.allow, a.message)
				}
			}
		}
	}
	// Percent-escaped, a path is what it decodes to.
	for _, c := range []struct{ path, code string }{
		{"/api/v1/chat%2Fcompletions", "method_not_allowed"},
		{"/api/v1/%63hat/completions", "method_not_allowed"},
		{"/api/v1/messages%2Fnope", "not_found"},
		{"/api/v1/chat/completions%2F", "not_found"},
		{"/api/v1/models%2Fnope", "model_not_found"},
		{"/api/v1/models/%2E%2E/usage", "model_not_found"},
	} {
		a := serve(h, "GET", c.path, "", "Authorization", "Bearer "+routesKey)
		if a.code != c.code {
			t.Errorf("GET %s: %d code %q, want %s\n%s", c.path, a.status, a.code, c.code, a.body)
		}
	}
	// A request line without a path: asterisk-form, absolute-form.
	for _, target := range []string{"*", "http://example.com"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path, r.RequestURI = "", target
		if target == "*" {
			r.URL.Path = "*"
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 404 || !strings.Contains(w.Body.String(), `"code":"not_found"`) {
			t.Errorf("GET %s: %d %s", target, w.Code, w.Body)
		}
	}
}

// /healthz answers any method, with no key, in plain text.
func TestRoutesHealthz(t *testing.T) {
	h := routesHandler(t)
	for _, m := range methods {
		for _, target := range []string{"/healthz", "/healthz?beta=true"} {
			a := serve(h, m, target, "")
			if a.status != 200 || a.contentType != "text/plain" || a.body != "ok\n" {
				t.Errorf("%s %s: %d %q %q", m, target, a.status, a.contentType, a.body)
			}
		}
	}
}

// Every endpoint but /healthz takes a key, in Authorization: Bearer or in
// x-api-key, and only one: none, a wrong one or two different ones are a
// 401 in the endpoint's envelope; the same key twice is one key.
func TestRoutesAuth(t *testing.T) {
	h := routesHandler(t)
	for _, rt := range routes {
		m := rt.allow[0]
		var body string
		if m == "POST" {
			body = rt.body
		}
		for _, c := range []struct {
			name   string
			header []string
			ok     bool
		}{
			{"no key", nil, false},
			{"a wrong key", []string{"Authorization", "Bearer sk-routes-wrong"}, false},
			{"a wrong x-api-key", []string{"X-Api-Key", "sk-routes-wrong"}, false},
			{"not bearer", []string{"Authorization", "Basic " + routesKey}, false},
			{"bearer", []string{"Authorization", "Bearer " + routesKey}, true},
			{"x-api-key", []string{"X-Api-Key", routesKey}, true},
			{"both, the same", []string{"Authorization", "Bearer " + routesKey, "X-Api-Key", routesKey}, true},
			{"both, two valid keys", []string{"Authorization", "Bearer " + routesKey, "X-Api-Key", routesOtherKey}, false},
			{"two bearers, two valid keys", []string{"Authorization", "Bearer " + routesKey, "Authorization", "Bearer " + routesOtherKey}, false},
			{"two x-api-keys, two valid keys", []string{"X-Api-Key", routesOtherKey, "X-Api-Key", routesKey}, false},
		} {
			a := serve(h, m, rt.path, body, c.header...)
			if c.ok {
				if a.status != rt.status || a.code != rt.code {
					t.Errorf("%s %s, %s: %d code %q, want %d %q\n%s", m, rt.path, c.name, a.status, a.code, rt.status, rt.code, a.body)
				}
				continue
			}
			if a.status != 401 || a.code != "invalid_api_key" || a.anthropic != rt.anthropic {
				t.Errorf("%s %s, %s: %d code %q anthropic %v, want 401 invalid_api_key anthropic %v\n%s", m, rt.path, c.name, a.status, a.code, a.anthropic, rt.anthropic, a.body)
			}
		}
	}
}

// BenchmarkRoute is what the handler costs for requests that end at
// routing or just after: a 404, a 405, /healthz and a model lookup.
func BenchmarkRoute(b *testing.B) {
	h := routesHandler(b)
	for _, c := range []struct{ name, method, path string }{
		{"healthz", "GET", "/healthz"},
		{"404", "GET", "/api/v1/nope"},
		{"405", "GET", "/api/v1/chat/completions"},
		{"405-messages", "GET", "/api/v1/messages"},
		{"model", "GET", "/api/v1/models/vendor/chat"},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest(c.method, c.path, nil)
			r.Header.Set("Authorization", "Bearer "+routesKey)
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	}
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
