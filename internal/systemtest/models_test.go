package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	oaoption "github.com/openai/openai-go/v3/option"
)

// anthropicModelJSON is Anthropic's model object as the gateway writes it
// for a model of the config.
func anthropicModelJSON(id string) string {
	return `{"type":"model","id":"` + id + `","display_name":"` + id + `","created_at":"1970-01-01T00:00:00Z","capabilities":null,` +
		`"max_input_tokens":null,"max_tokens":null,"lifecycle":"active","line":null,"deprecated_at":null,"retires_at":null}`
}

// TestModelsOpenAI: the OpenAI shapes, without anthropic-version: the list
// as it has always been, one model by id (escaped or not), 404 in OpenAI's
// envelope, HEAD, 405.
func TestModelsOpenAI(t *testing.T) {
	g := newClaudeGateway(t, "", "")
	list := send(t, http.MethodGet, g.url+"/api/v1/models", "", "Authorization", "Bearer "+testKey)
	var l struct {
		Object string
		Data   []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(list.body), &l); err != nil || list.status != 200 || l.Object != "list" || len(l.Data) != 3 ||
		l.Data[1].ID != "vendor/b" || list.header.Get("Vary") != "Anthropic-Version" {
		t.Errorf("list: %d %s %v", list.status, list.body, list.header)
	}
	want := `{"id":"vendor/b","object":"model","created":0,"owned_by":"buzzgate","providers":[{"name":"p1","model":"up-b","input_price":1,"output_price":2,"cache_read_price":1,"cache_write_price":1,"zdr":false,"data_collection":"allow"}]}` + "\n"
	for _, path := range []string{"/api/v1/models/vendor/b", "/api/v1/models/vendor%2Fb"} {
		a := send(t, http.MethodGet, g.url+path, "", "Authorization", "Bearer "+testKey)
		if a.status != 200 || a.body != want || a.header.Get("Content-Type") != "application/json" || a.header.Get("Vary") != "Anthropic-Version" {
			t.Errorf("GET %s: %d %s", path, a.status, a.body)
		}
	}
	h := send(t, http.MethodHead, g.url+"/api/v1/models/m", "", "Authorization", "Bearer "+testKey)
	if h.status != 200 || h.body != "" || h.header.Get("Content-Length") == "" {
		t.Errorf("HEAD: %d %q %v", h.status, h.body, h.header)
	}
	for _, path := range []string{"/api/v1/models/nope", "/api/v1/models/", "/api/v1/models/m:floor"} {
		a := send(t, http.MethodGet, g.url+path, "", "Authorization", "Bearer "+testKey)
		var e apiError
		json.Unmarshal([]byte(a.body), &e)
		if a.status != 404 || e.Error.Code != "model_not_found" || e.Error.Type != "not_found_error" || e.Error.Param == nil || *e.Error.Param != "model" {
			t.Errorf("GET %s: %d %s", path, a.status, a.body)
		}
	}
	p := send(t, http.MethodPost, g.url+"/api/v1/models/m", "{}", "Authorization", "Bearer "+testKey)
	if p.status != 405 || p.code != "method_not_allowed" || p.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d %s %v", p.status, p.body, p.header)
	}
	if a := send(t, http.MethodGet, g.url+"/api/v1/models/m", ""); a.status != 401 || a.code != "invalid_api_key" {
		t.Errorf("no key: %d %s", a.status, a.body)
	}

	// The official Go SDK.
	client := openai.NewClient(oaoption.WithBaseURL(g.url+"/api/v1"), oaoption.WithAPIKey(testKey), oaoption.WithMaxRetries(0))
	m, err := client.Models.Get(context.Background(), "m")
	if err != nil || m.ID != "m" || m.Object != "model" || m.Created != 0 || m.OwnedBy != "buzzgate" {
		t.Errorf("openai-go Models.Get: %+v %v", m, err)
	}
	_, err = client.Models.Get(context.Background(), "nope")
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != "model_not_found" {
		t.Errorf("openai-go Models.Get of an unknown model: %v", err)
	}
}

// TestModelsAnthropic: with anthropic-version, Anthropic's shapes: the list
// with its pagination, one model, errors in Anthropic's envelope.
func TestModelsAnthropic(t *testing.T) {
	g := newClaudeGateway(t, "", "")
	get := func(path string, header ...string) answer {
		return send(t, http.MethodGet, g.url+path, "", append([]string{"X-Api-Key", testKey, "Anthropic-Version", "2023-06-01"}, header...)...)
	}
	m, b, s := anthropicModelJSON("m"), anthropicModelJSON("vendor/b"), anthropicModelJSON("s")
	for _, c := range []struct{ query, want string }{
		{"", `{"data":[` + m + `,` + b + `,` + s + `],"has_more":false,"first_id":"m","last_id":"s"}`},
		{"?limit=1", `{"data":[` + m + `],"has_more":true,"first_id":"m","last_id":"m"}`},
		{"?limit=1&after_id=m", `{"data":[` + b + `],"has_more":true,"first_id":"vendor/b","last_id":"vendor/b"}`},
		{"?limit=2&after_id=vendor%2Fb", `{"data":[` + s + `],"has_more":false,"first_id":"s","last_id":"s"}`},
		{"?after_id=s", `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
		{"?limit=1&before_id=s", `{"data":[` + b + `],"has_more":true,"first_id":"vendor/b","last_id":"vendor/b"}`},
		{"?before_id=s", `{"data":[` + m + `,` + b + `],"has_more":false,"first_id":"m","last_id":"vendor/b"}`},
		{"?before_id=m", `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
		{"?limit=1000&beta=true", `{"data":[` + m + `,` + b + `,` + s + `],"has_more":false,"first_id":"m","last_id":"s"}`},
		{"?lifecycle[]=retired", `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
		{"?lifecycle=deprecated,active&limit=1", `{"data":[` + m + `],"has_more":true,"first_id":"m","last_id":"m"}`},
	} {
		a := get("/api/v1/models" + c.query)
		if a.status != 200 || a.body != c.want+"\n" || a.header.Get("Content-Type") != "application/json" || a.header.Get("Vary") != "Anthropic-Version" {
			t.Errorf("list %s: %d\n%s\nwant\n%s", c.query, a.status, a.body, c.want)
		}
	}
	for _, c := range []struct{ query, param string }{
		{"?limit=0", "limit"}, {"?limit=1001", "limit"}, {"?limit=ten", "limit"},
		{"?after_id=nope", "after_id"}, {"?before_id=nope", "before_id"},
		{"?after_id=m&before_id=s", "before_id"}, {"?lifecycle=gone", "lifecycle"},
	} {
		e := expectAnthropicError(t, "list "+c.query, get("/api/v1/models"+c.query), 400, "invalid_request_error", "invalid_request")
		if e.Error.Param != c.param {
			t.Errorf("list %s: param %q, want %q", c.query, e.Error.Param, c.param)
		}
	}
	for _, path := range []string{"/api/v1/models/vendor/b", "/api/v1/models/vendor%2Fb", "/api/v1/models/vendor/b?beta=true"} {
		if a := get(path); a.status != 200 || a.body != b+"\n" {
			t.Errorf("GET %s: %d %s", path, a.status, a.body)
		}
	}
	expectAnthropicError(t, "an unknown model", get("/api/v1/models/nope"), 404, "not_found_error", "model_not_found")
	expectAnthropicError(t, "no key", send(t, http.MethodGet, g.url+"/api/v1/models", "", "Anthropic-Version", "2023-06-01"),
		401, "authentication_error", "invalid_api_key")
	a := send(t, http.MethodDelete, g.url+"/api/v1/models/m", "", "X-Api-Key", testKey, "Anthropic-Version", "2023-06-01")
	expectAnthropicError(t, "DELETE", a, 405, "invalid_request_error", "method_not_allowed")

	// The official Go SDK, with x-api-key alone (this SDK sends its API key
	// as a bearer token; older ones, and Claude Code, in x-api-key).
	var mu sync.Mutex
	var seen []string
	client := anthropic.NewClient(option.WithBaseURL(g.url+"/api/"), option.WithMaxRetries(0),
		option.WithHeader("X-Api-Key", testKey), option.WithHeaderDel("Authorization"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.RequestURI()+" authorization="+r.Header.Get("Authorization")+" x-api-key="+r.Header.Get("X-Api-Key"))
			mu.Unlock()
			return next(r)
		}))
	ctx := context.Background()
	page, err := client.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(page.Data) != 3 || page.HasMore || page.FirstID != "m" || page.LastID != "s" {
		t.Fatalf("Models.List: %+v %v", page, err)
	}
	if got := page.Data[1]; got.ID != "vendor/b" || got.DisplayName != "vendor/b" || !got.CreatedAt.Equal(time.Unix(0, 0)) || got.Lifecycle != "active" {
		t.Errorf("Models.List's second model: %+v", got)
	}
	var ids []string
	iter := client.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)})
	for iter.Next() {
		ids = append(ids, iter.Current().ID)
	}
	if err := iter.Err(); err != nil || !cmp.Equal(ids, []string{"m", "vendor/b", "s"}) {
		t.Errorf("Models.ListAutoPaging by one: %v %v", ids, err)
	}
	one, err := client.Models.Get(ctx, "vendor/b", anthropic.ModelGetParams{})
	if err != nil || one.ID != "vendor/b" || one.Type != "model" {
		t.Errorf("Models.Get: %+v %v", one, err)
	}
	_, err = client.Models.Get(ctx, "nope", anthropic.ModelGetParams{})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || !strings.Contains(ae.RawJSON(), `"not_found_error"`) {
		t.Errorf("Models.Get of an unknown model: %v", err)
	}
	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    "m",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: "Be brief."}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	})
	if err != nil || count.InputTokens != 37 {
		t.Errorf("Messages.CountTokens: %+v %v", count, err)
	}
	if up := g.claude.CountTokensRequests(); len(up) != 1 || up[0].JSON["model"] != "claude-x" {
		t.Errorf("the upstream's count_tokens calls: %v", up)
	}
	mu.Lock()
	defer mu.Unlock()
	wantSeen := []string{
		"GET /api/v1/models",
		"GET /api/v1/models?limit=1", "GET /api/v1/models?after_id=m&limit=1", "GET /api/v1/models?after_id=vendor%2Fb&limit=1",
		"GET /api/v1/models/vendor%2Fb", "GET /api/v1/models/nope",
		"POST /api/v1/messages/count_tokens",
	}
	for i := range wantSeen {
		wantSeen[i] += " authorization= x-api-key=" + testKey
	}
	if diff := cmp.Diff(wantSeen, seen); diff != "" {
		t.Errorf("the SDK's requests (-want +got):\n%s", diff)
	}
}

// TestKeyHeaders: every endpoint takes the key in Authorization: Bearer or
// in x-api-key, or both when they carry the same key; two different keys,
// both valid, are refused, in the envelope of the endpoint's API.
func TestKeyHeaders(t *testing.T) {
	g := newClaudeGateway(t, "", "")
	// An answer and a kept response to point feedback and GET /responses at.
	chat := send(t, http.MethodPost, g.url+"/api/v1/chat/completions", `{"model":"vendor/b","messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key", testKey)
	resp := send(t, http.MethodPost, g.url+"/api/v1/responses", `{"model":"vendor/b","input":"hi"}`, "X-Api-Key", testKey)
	var r struct{ ID string }
	json.Unmarshal([]byte(resp.body), &r)
	if chat.status != 200 || resp.status != 200 || r.ID == "" {
		t.Fatalf("chat %d %s, responses %d %s", chat.status, chat.body, resp.status, resp.body)
	}
	type endpoint struct {
		method, path, body string
		anthropic          bool // errors in Anthropic's envelope
	}
	for _, e := range []endpoint{
		{"POST", "/api/v1/chat/completions", `{"model":"vendor/b","messages":[{"role":"user","content":"hi"}]}`, false},
		{"POST", "/api/v1/responses", `{"model":"vendor/b","input":"hi","store":false}`, false},
		{"GET", "/api/v1/responses/" + r.ID, "", false},
		{"POST", "/api/v1/messages", `{"model":"vendor/b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"POST", "/api/v1/messages/count_tokens", `{"model":"vendor/b","messages":[{"role":"user","content":"hi"}]}`, true},
		{"GET", "/api/v1/models", "", false},
		{"GET", "/api/v1/models/m", "", false},
		{"POST", "/api/v1/feedback", `{"request_id":"` + chat.reqID + `","end_user":"u1","score":1}`, false},
		{"GET", "/api/v1/usage", "", false},
	} {
		for _, c := range []struct {
			name   string
			header []string
			status int
		}{
			{"x-api-key", []string{"X-Api-Key", testKey}, 200},
			{"bearer", []string{"Authorization", "Bearer " + testKey}, 200},
			{"both, the same key", []string{"Authorization", "Bearer " + testKey, "X-Api-Key", testKey}, 200},
			{"both, two keys", []string{"Authorization", "Bearer " + testKey, "X-Api-Key", otherKey}, 401},
			{"both, a bad bearer", []string{"Authorization", "Bearer sk-nope", "X-Api-Key", testKey}, 401},
			{"an unknown x-api-key", []string{"X-Api-Key", "sk-nope"}, 401},
			{"none", nil, 401},
		} {
			a := send(t, e.method, g.url+e.path, e.body, c.header...)
			what := e.method + " " + e.path + " with " + c.name
			if c.status == 200 {
				if a.status != 200 {
					t.Errorf("%s: %d %s", what, a.status, a.body)
				}
				continue
			}
			var msg string
			if e.anthropic {
				msg = expectAnthropicError(t, what, a, 401, "authentication_error", "invalid_api_key").Error.Message
			} else {
				var oe apiError
				json.Unmarshal([]byte(a.body), &oe)
				if a.status != 401 || oe.Error.Code != "invalid_api_key" || oe.Error.Type != "authentication_error" {
					t.Errorf("%s: %d %s", what, a.status, a.body)
				}
				msg = oe.Error.Message
			}
			wantMsg := map[string]string{
				"both, two keys":     "Authorization: Bearer and x-api-key carry two different keys; send one key",
				"both, a bad bearer": "Authorization: Bearer and x-api-key carry two different keys; send one key",
				"none":               "missing API key: send Authorization: Bearer <key> or x-api-key: <key>",
			}[c.name]
			if wantMsg != "" && msg != wantMsg {
				t.Errorf("%s: message %q, want %q", what, msg, wantMsg)
			}
		}
	}
}

// TestQueryIgnored: a query string (?beta=true, as Claude Code sends) is
// ignored on every path but where the API reads one (Anthropic's model
// list, usage): same status, same answer, and on Messages the same
// idempotency record.
func TestQueryIgnored(t *testing.T) {
	g := newClaudeGateway(t, "", "")
	msg := `{"model":"vendor/b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	first := send(t, http.MethodPost, g.url+"/api/v1/messages?beta=true", msg, "X-Api-Key", testKey, "Idempotency-Key", key(t))
	again := send(t, http.MethodPost, g.url+"/api/v1/messages", msg, "X-Api-Key", testKey, "Idempotency-Key", key(t))
	if first.status != 200 || again.status != 200 || again.replayed != "true" || again.body != first.body || g.p1.Calls() != 1 {
		t.Errorf("a keyed message with and without ?beta=true: %d, %d replayed=%q, %d upstream calls", first.status, again.status, again.replayed, g.p1.Calls())
	}
	resp := send(t, http.MethodPost, g.url+"/api/v1/responses?beta=true", `{"model":"vendor/b","input":"hi"}`, "X-Api-Key", testKey)
	var r struct{ ID string }
	json.Unmarshal([]byte(resp.body), &r)
	for _, c := range []struct {
		method, path, body string
		header             []string
		status             int
	}{
		{"POST", "/api/v1/chat/completions", `{"model":"vendor/b","messages":[{"role":"user","content":"hi"}]}`, nil, 200},
		{"POST", "/api/v1/responses", `{"model":"vendor/b","input":"hi","store":false}`, nil, 200},
		{"GET", "/api/v1/responses/" + r.ID, "", nil, 200},
		{"POST", "/api/v1/messages", msg, nil, 200},
		{"POST", "/api/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil, 200},
		{"GET", "/api/v1/models", "", nil, 200},
		{"GET", "/api/v1/models", "", []string{"Anthropic-Version", "2023-06-01"}, 200},
		{"GET", "/api/v1/models/m", "", []string{"Anthropic-Version", "2023-06-01"}, 200},
		{"GET", "/api/v1/usage", "", nil, 200},
		{"GET", "/healthz", "", nil, 200},
		{"POST", "/api/v1/nope", "{}", nil, 404},
		{"GET", "/api/v1/messages", "", nil, 405},
	} {
		h := append([]string{"X-Api-Key", testKey}, c.header...)
		plain := send(t, c.method, g.url+c.path, c.body, h...)
		queried := send(t, c.method, g.url+c.path+"?beta=true&x=%ZZ", c.body, h...)
		if plain.status != c.status || queried.status != c.status {
			t.Errorf("%s %s: %d, with a query %d, want %d", c.method, c.path, plain.status, queried.status, c.status)
		}
		// Answers that do not change from one call to the next are the same.
		if c.method == "GET" && c.status == 200 && c.path != "/api/v1/usage" && queried.body != plain.body {
			t.Errorf("%s %s with a query:\n%s\nwithout:\n%s", c.method, c.path, queried.body, plain.body)
		}
	}
}
