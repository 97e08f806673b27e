package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// passTurnsGateway serves model m from one openai-responses route, so that
// a Responses request passes through, for two projects: proj (testKey)
// and other (otherProjectKey).
func passTurnsGateway(t *testing.T) (string, *providertest.Server) {
	t.Helper()
	up := providertest.NewResponses(t)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: up, api: openai-responses, base_url: %q, api_key_env: UP_KEY}
models:
  - id: m
    routes: [{provider: up, model: up-model, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: %s}]
  - id: other
    keys: [{key: %s}]
`, up.URL(), testKey, otherProjectKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Getenv: func(string) string { return "up-secret" }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, up
}

// terminalResponse is the response object of a Responses stream's last
// event.
func terminalResponse(t *testing.T, body string) (id string, store *bool) {
	t.Helper()
	evs := readEvents(t, body)
	if len(evs) == 0 {
		t.Fatalf("no events: %s", clip(body))
	}
	var v struct {
		Response struct {
			ID    string `json:"id"`
			Store *bool  `json:"store"`
		} `json:"response"`
	}
	json.Unmarshal([]byte(evs[len(evs)-1].data), &v)
	return v.Response.ID, v.Response.Store
}

// TestPassedThroughTurnsAreKept: a Responses answer passed through from a
// Responses upstream is kept as a translated one is, under the provider's
// response id and for the caller's project only: GET answers it to its
// project (404 to another), previous_response_id continues it (the
// gateway sends the conversation upstream, never the id), and another
// project's previous_response_id is a 400 with no provider call. The
// answer's store says whether it was kept, streamed or not.
func TestPassedThroughTurnsAreKept(t *testing.T) {
	url, up := passTurnsGateway(t)
	other := []string{"Authorization", "Bearer " + otherProjectKey}

	first := respond(t, url, `{"model":"m","input":"first question"}`)
	if first.status != 200 || first.ID != "resp_1" || first.stored() != "true" {
		t.Fatalf("first turn: status %d, id %q, store %s: %s", first.status, first.ID, first.stored(), clip(first.body))
	}
	status, got := getResponse(t, url, testKey, first.ID)
	if status != 200 || !strings.Contains(got, `"id":"resp_1"`) || !strings.Contains(got, `"store":true`) || !strings.Contains(got, `"cost":`) {
		t.Errorf("GET by its project: %d %s", status, clip(got))
	}
	if status, got := getResponse(t, url, otherProjectKey, first.ID); status != 404 || !strings.Contains(got, `"code":"not_found"`) {
		t.Errorf("GET by another project: %d %s, want 404", status, clip(got))
	}

	// Another project cannot continue it, and nothing goes upstream.
	stolen := respond(t, url, turnBody("go on", first.ID), other...)
	if stolen.status != 400 || stolen.Err.Param != "previous_response_id" || up.Calls() != 1 {
		t.Errorf("another project's previous_response_id: status %d, param %q, calls %d: %s", stolen.status, stolen.Err.Param, up.Calls(), clip(stolen.body))
	}

	// Its own project continues it, streaming: the upstream gets the whole
	// conversation and no previous_response_id.
	next := callPath(t, url+"/api/v1/responses", turnBody("second question", first.ID, `"stream":true`))
	if next.status != 200 {
		t.Fatalf("continuation: status %d: %s", next.status, clip(next.body))
	}
	nextID, nextStore := terminalResponse(t, next.body)
	if nextID == "" || nextStore == nil || !*nextStore {
		t.Errorf("continuation: id %q, store %v: %s", nextID, nextStore, clip(next.body))
	}
	sent := string(up.Requests()[1].Body)
	if strings.Contains(sent, "previous_response_id") || !strings.Contains(sent, "first question") || !strings.Contains(sent, "Hello world") || !strings.Contains(sent, "second question") {
		t.Errorf("the continuation sent upstream lacks the conversation: %s", clip(sent))
	}

	// A stream passed through is kept too, its last event saying so.
	streamed := callPath(t, url+"/api/v1/responses", `{"model":"m","stream":true,"input":"third"}`)
	id, store := terminalResponse(t, streamed.body)
	if streamed.status != 200 || id != fmt.Sprintf("resp_%d", up.Calls()) || store == nil || !*store {
		t.Fatalf("streamed turn: status %d, id %q, store %v: %s", streamed.status, id, store, clip(streamed.body))
	}
	if status, got := getResponse(t, url, testKey, id); status != 200 || !strings.Contains(got, `"id":"`+id+`"`) {
		t.Errorf("GET of the streamed turn: %d %s", status, clip(got))
	}
	if status, _ := getResponse(t, url, otherProjectKey, id); status != 404 {
		t.Errorf("GET of the streamed turn by another project: %d, want 404", status)
	}
	cont := respond(t, url, turnBody("fourth", id))
	if cont.status != 200 || !strings.Contains(string(up.Requests()[up.Calls()-1].Body), "third") {
		t.Errorf("continuing the streamed turn: status %d: %s", cont.status, clip(cont.body))
	}

	// store false: not kept, and the answer says so.
	unkept := respond(t, url, `{"model":"m","store":false,"input":"forget me"}`)
	if unkept.status != 200 || unkept.stored() != "false" {
		t.Errorf("store false: status %d, store %s", unkept.status, unkept.stored())
	}
	if status, _ := getResponse(t, url, testKey, unkept.ID); status != 404 {
		t.Errorf("GET of a turn asked with store false: %d, want 404", status)
	}
}

// TestPassedThroughTurnsWithTheSDK: the official openai-go SDK, on a
// Responses route that passes through, retrieves its response, continues
// it with previous_response_id, and gets 404 for it under another
// project's key.
func TestPassedThroughTurnsWithTheSDK(t *testing.T) {
	url, up := passTurnsGateway(t)
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(url+"/api/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))

	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "resp_1" || !strings.Contains(r.RawJSON(), `"store":true`) {
		t.Fatalf("response %q: %s", r.ID, clip(r.RawJSON()))
	}
	got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != r.ID || got.OutputText() != r.OutputText() {
		t.Errorf("GET its own response: %v", err)
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And again")}})
	if err != nil || next.Status != "completed" {
		t.Fatalf("continuing it: %v", err)
	}
	if sent := string(up.Requests()[1].Body); !strings.Contains(sent, "Say hello") || !strings.Contains(sent, r.OutputText()) {
		t.Errorf("the continuation sent upstream lacks the first turn: %s", clip(sent))
	}
	other := openai.NewClient(option.WithBaseURL(url+"/api/v1/"), option.WithAPIKey(otherProjectKey), option.WithMaxRetries(0))
	_, err = other.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("GET by another project: %v, want 404", err)
	}
	_, err = other.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("mine now")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" || up.Calls() != 2 {
		t.Errorf("continuing it from another project: %v (%d calls), want 400 naming previous_response_id", err, up.Calls())
	}
}
