package systemtest_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// objectsGateway serves, for each upstream api (openai, anthropic,
// openai-responses), a provider "shut-<api>" with the default
// provider_objects and one "open-<api>" with provider_objects: allow, and
// the models "only-<api>" (the shut provider alone) and "both-<api>" (the
// shut provider first, then the open one).
type objectsGateway struct {
	url        string
	shut, open map[string]*providertest.Server
}

var objectAPIs = []string{"openai", "anthropic", "openai-responses"}

func newObjectsGateway(t *testing.T) *objectsGateway {
	t.Helper()
	g := &objectsGateway{shut: map[string]*providertest.Server{}, open: map[string]*providertest.Server{}}
	var cfg strings.Builder
	cfg.WriteString("providers:\n")
	for _, api := range objectAPIs {
		g.shut[api], g.open[api] = upstreamFor(t, api), upstreamFor(t, api)
		fmt.Fprintf(&cfg, "  - {name: shut-%s, api: %s, base_url: %q, api_key_env: UP_KEY}\n", api, api, g.shut[api].URL())
		fmt.Fprintf(&cfg, "  - {name: open-%s, api: %s, base_url: %q, api_key_env: UP_KEY, provider_objects: allow}\n", api, api, g.open[api].URL())
	}
	cfg.WriteString("models:\n")
	for _, api := range objectAPIs {
		fmt.Fprintf(&cfg, "  - {id: only-%s, routes: [{provider: shut-%s, model: up, input_price: 1, output_price: 2}]}\n", api, api)
		fmt.Fprintf(&cfg, "  - {id: both-%s, routes: [{provider: shut-%s, model: up, input_price: 1, output_price: 2}, {provider: open-%s, model: up, input_price: 1, output_price: 2}]}\n", api, api, api)
	}
	fmt.Fprintf(&cfg, "projects:\n  - id: proj\n    keys: [{key: %s}]\n", testKey)
	c, err := catalog.Parse([]byte(cfg.String()))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, cfg.String())
	}
	a, err := app.FromConfig(c, app.Options{Getenv: func(string) string { return "up-secret" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

func (g *objectsGateway) calls() int {
	n := 0
	for _, api := range objectAPIs {
		n += g.shut[api].Calls() + g.open[api].Calls()
	}
	return n
}

// nativeAPI is the upstream api each client API passes through to.
var nativeAPI = map[string]string{"/api/v1/chat/completions": "openai", "/api/v1/messages": "anthropic", "/api/v1/responses": "openai-responses"}

// objectCase is a request that refers to an object stored at the provider.
type objectCase struct {
	name, path, body, param string
}

// objectCases are references on each client API; %s is the model.
var objectCases = []objectCase{
	{"chat file", "/api/v1/chat/completions", `{"model":"%s","messages":[{"role":"user","content":[{"type":"text","text":"sum up"},{"type":"file","file":{"file_id":"file-of-another-project"}}]}]}`,
		"messages[0].content[1].file.file_id"},
	{"chat audio", "/api/v1/chat/completions", `{"model":"%s","messages":[{"role":"user","content":"hi"},{"role":"assistant","audio":{"id":"audio_abc"}},{"role":"user","content":"again"}]}`,
		"messages[1].audio.id"},
	{"messages document", "/api/v1/messages", `{"model":"%s","max_tokens":64,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_011"}},{"type":"text","text":"sum up"}]}]}`,
		"messages[0].content[0].source.file_id"},
	{"messages image in tool result", "/api/v1/messages", `{"model":"%s","max_tokens":64,"messages":[{"role":"user","content":"look"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"file","file_id":"file_011"}}]}]}]}`,
		"messages[2].content[0].content[0].source.file_id"},
	{"messages container", "/api/v1/messages", `{"model":"%s","max_tokens":64,"container":"container_011","messages":[{"role":"user","content":"run it"}]}`,
		"container"},
	{"responses input_file", "/api/v1/responses", `{"model":"%s","input":[{"role":"user","content":[{"type":"input_text","text":"sum up"},{"type":"input_file","file_id":"file-abc"}]}]}`,
		"input[0].content[1].file_id"},
	{"responses input_image", "/api/v1/responses", `{"model":"%s","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-abc"}]}]}`,
		"input[0].content[0].file_id"},
	{"responses item_reference", "/api/v1/responses", `{"model":"%s","input":[{"type":"item_reference","id":"msg_abc"},{"role":"user","content":"and?"}]}`,
		"input[0].id"},
	{"responses conversation", "/api/v1/responses", `{"model":"%s","conversation":"conv_abc","input":"hi"}`,
		"conversation"},
	{"responses vector stores", "/api/v1/responses", `{"model":"%s","input":"find it","tools":[{"type":"file_search","vector_store_ids":["vs_abc"]}]}`,
		"tools[0].vector_store_ids"},
	{"responses container", "/api/v1/responses", `{"model":"%s","input":"run it","tools":[{"type":"code_interpreter","container":"cntr_abc"}]}`,
		"tools[0].container"},
}

// TestProviderObjectsRefused: on every client API, passed through or
// translated, a request that names an object stored in the upstream
// account (a file, a container, a stored conversation or item, a vector
// store) is a 400 invalid_request naming the field, in the API's own
// envelope, when no provider of its model has provider_objects: allow;
// no provider is called.
func TestProviderObjectsRefused(t *testing.T) {
	g := newObjectsGateway(t)
	for _, tc := range objectCases {
		for _, api := range objectAPIs {
			body := fmt.Sprintf(tc.body, "only-"+api)
			a := callPath(t, g.url+tc.path, body, "anthropic-version", "2023-06-01", "Idempotency-Key", "k-"+tc.name+api)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Code  string  `json:"code"`
					Param *string `json:"param"`
				} `json:"error"`
			}
			json.Unmarshal([]byte(a.body), &e)
			if a.status != 400 || e.Error.Code != "invalid_request" || e.Error.Param == nil || *e.Error.Param != tc.param {
				t.Errorf("%s on %s: status %d, want 400 invalid_request naming %s: %s", tc.name, api, a.status, tc.param, clip(a.body))
			}
			if wantType := map[bool]string{true: "error", false: ""}[tc.path == "/api/v1/messages"]; e.Type != wantType {
				t.Errorf("%s on %s: envelope type %q, want %q (the client API's own envelope)", tc.name, api, e.Type, wantType)
			}
		}
	}
	// The Messages token count goes upstream too.
	a := callPath(t, g.url+"/api/v1/messages/count_tokens", fmt.Sprintf(objectCases[2].body, "only-anthropic"), "anthropic-version", "2023-06-01")
	if a.status != 400 || !strings.Contains(a.body, `"param":"messages[0].content[0].source.file_id"`) {
		t.Errorf("count_tokens: status %d: %s", a.status, clip(a.body))
	}
	if n := g.calls(); n != 0 {
		t.Errorf("%d provider calls, want none", n)
	}
	for _, api := range objectAPIs {
		if n := len(g.shut[api].CountTokensRequests()); n != 0 {
			t.Errorf("%s: %d count_tokens calls, want none", api, n)
		}
	}
	// Nothing was stored under a refused request's Idempotency-Key: the
	// key runs another request (a stored record would make it a 409).
	a = callPath(t, g.url+"/api/v1/chat/completions", `{"model":"only-openai","messages":[{"role":"user","content":"hi"}]}`, "Idempotency-Key", "k-"+objectCases[0].name+"openai")
	if a.status != 200 {
		t.Errorf("the refused request's key: status %d: %s", a.status, clip(a.body))
	}
}

// TestProviderObjectsGoToProvidersThatAllowThem: a model whose routes
// differ sends a request with a reference only to the provider that allows
// it (here its second route; the first is never called for it), which
// gets the reference as the client wrote it when the request passes
// through; the same request without the reference goes to the first route.
func TestProviderObjectsGoToProvidersThatAllowThem(t *testing.T) {
	g := newObjectsGateway(t)
	native := nativeAPI
	for _, tc := range []objectCase{objectCases[0], objectCases[2], objectCases[5], objectCases[8]} {
		api := native[tc.path]
		a := callPath(t, g.url+tc.path, fmt.Sprintf(tc.body, "both-"+api), "anthropic-version", "2023-06-01")
		if a.status != 200 || a.provider != "open-"+api {
			t.Errorf("%s: status %d from %q, want 200 from open-%s: %s", tc.name, a.status, a.provider, api, clip(a.body))
			continue
		}
		if n := g.shut[api].Calls(); n != 0 {
			t.Errorf("%s: shut-%s was called %d times", tc.name, api, n)
		}
		reqs := g.open[api].Requests()
		ref := map[string]string{"chat file": `"file_id":"file-of-another-project"`, "messages document": `"file_id":"file_011"`,
			"responses input_file": `"file_id":"file-abc"`, "responses conversation": `"conversation":"conv_abc"`}[tc.name]
		if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, ref) {
			t.Errorf("%s: the reference did not reach the provider that allows it: %s", tc.name, clip(last))
		}
	}
	a := callPath(t, g.url+"/api/v1/responses", `{"model":"both-openai-responses","input":"hi"}`)
	if a.status != 200 || a.provider != "shut-openai-responses" {
		t.Errorf("without a reference: status %d from %q, want 200 from the first route", a.status, a.provider)
	}
}
