package systemtest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/metrics"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// bedrockFirst is a gateway whose model "m" routes to Claude on a fake
// Bedrock, then to an OpenAI fake; it returns the URL, both fakes, and the
// gateway's log and EMF metric lines.
func bedrockFirst(t *testing.T) (url string, bedrock, openai *providertest.Server, logs, emf *syncBuffer) {
	t.Helper()
	return bedrockFirstModel(t, bedrockClaude)
}

// bedrockFirstModel is bedrockFirst with the Bedrock route's model.
func bedrockFirstModel(t *testing.T, model string) (url string, bedrock, openai *providertest.Server, logs, emf *syncBuffer) {
	t.Helper()
	bedrock, openai = providertest.NewBedrock(t), providertest.New(t)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: aws, api: bedrock, aws_region: %s, base_url: %q}
  - {name: p1, api: openai, base_url: %q}
models:
  - id: m
    routes:
      - {provider: aws, model: %q, input_price: 1, output_price: 2}
      - {provider: p1, model: up-1, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %s}]
`, providertest.BedrockRegion, bedrock.URL(), openai.URL(), model, testKey))
	if err != nil {
		t.Fatal(err)
	}
	logs, emf = new(syncBuffer), new(syncBuffer)
	a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), AWSCredentials: bedrockCredentials,
		Metrics: metrics.NewEMF(emf, "test")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, bedrock, openai, logs, emf
}

// TestBedrockFallback: a throttled Bedrock route falls back to the next
// provider before any output, and the next request goes back to Bedrock;
// on each client API.
func TestBedrockFallback(t *testing.T) {
	for _, api := range []struct{ name, path, body string }{
		{"chat", "/api/v1/chat/completions", chatBody(`"stream":true`)},
		{"messages", "/api/v1/messages", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Say hello"}]}`},
		{"responses", "/api/v1/responses", `{"model":"m","input":"Say hello"}`},
	} {
		t.Run(api.name, func(t *testing.T) {
			url, bedrock, openai, _, _ := bedrockFirst(t)
			bedrock.Script(providertest.Response{Status: 429}, providertest.Response{Text: []string{"From", " Bedrock"}})
			first := callPath(t, url+api.path, api.body, "anthropic-version", "2023-06-01")
			if first.status != 200 || first.provider != "p1" || first.header.Get("X-Gateway-Route-Depth") != "1" {
				t.Fatalf("throttled Bedrock: %d from %q (depth %s): %s", first.status, first.provider, first.header.Get("X-Gateway-Route-Depth"), first.body)
			}
			again := callPath(t, url+api.path, api.body, "anthropic-version", "2023-06-01")
			if again.status != 200 || again.provider != "aws" || !strings.Contains(again.body, "Bedrock") {
				t.Fatalf("Bedrock again: %d from %q: %s", again.status, again.provider, again.body)
			}
			if bedrock.Calls() != 2 || openai.Calls() != 1 {
				t.Errorf("calls: Bedrock %d, OpenAI %d; want 2, 1", bedrock.Calls(), openai.Calls())
			}
		})
	}
}

// TestBedrockConfigErrorTakesRouteOut: Bedrock's AccessDeniedException (no
// access to the model) is the operator's to fix: the request falls back,
// the gateway logs an error naming the provider and the model and counts
// ProviderConfigErrors, and the route stays out for the health cooldown
// (the next request does not call it).
func TestBedrockConfigErrorTakesRouteOut(t *testing.T) {
	for _, status := range []int{403, 404} {
		url, bedrock, openai, logs, emf := bedrockFirst(t)
		bedrock.SetDefault(providertest.Response{Status: status})
		for i := range 3 {
			a := mustCall(t, url, chatBody(""))
			if a.status != 200 || a.provider != "p1" {
				t.Fatalf("%d, request %d: %d from %q: %s", status, i, a.status, a.provider, a.body)
			}
		}
		if bedrock.Calls() != 1 || openai.Calls() != 3 {
			t.Errorf("%d: calls Bedrock %d, OpenAI %d; want 1 (then out), 3", status, bedrock.Calls(), openai.Calls())
		}
		want := map[int]string{403: "AccessDeniedException", 404: "ResourceNotFoundException"}[status]
		var line string
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "provider configuration error") {
				line = l
			}
		}
		if !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, `"provider":"aws"`) || !strings.Contains(line, `"model":"`+bedrockClaude+`"`) ||
			!strings.Contains(line, want) || strings.Count(logs.String(), "provider configuration error") != 1 {
			t.Errorf("%d: log:\n%s", status, logs.String())
		}
		if !strings.Contains(emf.String(), `"ProviderConfigErrors":1`) {
			t.Errorf("%d: no ProviderConfigErrors metric:\n%s", status, emf.String())
		}
	}
}

// novaModel is a Bedrock model that is not Claude: it goes through Converse.
const novaModel = "amazon.nova-pro-v1:0"

// TestBedrockConverse: on a Bedrock route to a model other than Claude,
// each client API's request, whole and streamed, is translated to a signed
// ConverseStream call, and the Converse events come back as that API's
// answer, priced from Converse's usage.
func TestBedrockConverse(t *testing.T) {
	up := providertest.NewBedrock(t)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: aws, api: bedrock, aws_region: %s, base_url: %q}
models:
  - id: m
    routes: [{provider: aws, model: %q, input_price: 1, output_price: 2}]
projects:
  - id: proj
    keys: [{key: %s}]
`, providertest.BedrockRegion, up.URL(), novaModel, testKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.DiscardHandler), AWSCredentials: bedrockCredentials})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	for _, c := range []struct{ name, path, body, text string }{
		{"chat", "/api/v1/chat/completions", chatBody(`"user":"u-1"`), `"content":"Hello world"`},
		{"chat stream", "/api/v1/chat/completions", chatBody(`"stream":true,"stream_options":{"include_usage":true}`), `"content":" world"`},
		{"messages", "/api/v1/messages", `{"model":"m","max_tokens":50,"system":"Be brief.","messages":[{"role":"user","content":"Say hello"}]}`, `"text":"Hello world"`},
		{"messages stream", "/api/v1/messages", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`, `"text":" world"`},
		{"responses", "/api/v1/responses", `{"model":"m","input":"Say hello"}`, `"text":"Hello world"`},
		{"responses stream", "/api/v1/responses", `{"model":"m","input":"Say hello","stream":true}`, `"delta":" world"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := up.Calls()
			r := callPath(t, srv.URL+c.path, c.body, "anthropic-version", "2023-06-01")
			if r.status != 200 || r.provider != "aws" || !strings.Contains(r.body, c.text) {
				t.Fatalf("%d from %q: %s", r.status, r.provider, r.body)
			}
			// 10 prompt tokens at 1 USD and 2 completion tokens at 2 USD a
			// million: the usage Converse's metadata event reported.
			if cost, err := costIn(r.body); err != nil || cost != 0.000014 {
				t.Errorf("cost %v (%v), want 0.000014", cost, err)
			}
			if up.Calls() != before+1 {
				t.Fatalf("%d Bedrock calls, want 1", up.Calls()-before)
			}
			req := up.Requests()[before]
			if req.Path != "/model/"+novaModel+providertest.ConverseStreamSuffix {
				t.Errorf("Bedrock call %s", req.Path)
			}
			msgs, _ := json.Marshal(req.JSON["messages"])
			if string(msgs) != `[{"content":[{"text":"Say hello"}],"role":"user"}]` {
				t.Errorf("Converse messages %s", msgs)
			}
		})
	}
	if r := callPath(t, srv.URL+"/api/v1/chat/completions", chatBody(`"n":2`)); r.status != 400 || !strings.Contains(r.body, "n is not supported on Bedrock Converse") || up.Calls() != 6 {
		t.Errorf("n=2: %d %s, %d Bedrock calls; want a 400 before any call", r.status, r.body, up.Calls())
	}
}

// TestBedrockReplay: a keyed request answered by Bedrock, Claude or
// Converse, is answered again from its record: one Bedrock call, the same
// body, Idempotency-Replayed.
func TestBedrockReplay(t *testing.T) {
	url, bedrock, _, _, _ := bedrockFirst(t)
	for i, body := range []string{
		`{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`,
		`{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Say hello"}]}`,
	} {
		key := fmt.Sprintf("bedrock-replay-%d", i)
		first := callPath(t, url+"/api/v1/messages", body, "Idempotency-Key", key, "anthropic-version", "2023-06-01")
		again := callPath(t, url+"/api/v1/messages", body, "Idempotency-Key", key, "anthropic-version", "2023-06-01")
		if first.status != 200 || first.provider != "aws" || again.status != 200 || again.body != first.body ||
			again.header.Get("Idempotency-Replayed") != "true" || bedrock.Calls() != i+1 {
			t.Errorf("%d: first %d from %q, again %d (replayed %q, same body %v), %d Bedrock calls",
				i, first.status, first.provider, again.status, again.header.Get("Idempotency-Replayed"), again.body == first.body, bedrock.Calls())
		}
	}
}

// TestBedrockCuts: on both Bedrock paths (Claude's chunks, Converse's
// events), a stream cut before any output falls back to the next route; one
// cut after output (a reset connection, an exception in the stream) ends
// the answer as any provider's does: the text produced reaches the client,
// then the error, with the usage; no fallback.
func TestBedrockCuts(t *testing.T) {
	for _, model := range []string{bedrockClaude, novaModel} {
		t.Run(model, func(t *testing.T) {
			for _, how := range []providertest.CutMode{providertest.CutReset, providertest.CutError} {
				url, bedrock, openai, _, _ := bedrockFirstModel(t, model)
				bedrock.Script(providertest.Response{Text: []string{"a", "b"}, Cut: &providertest.Cut{After: 0, How: providertest.CutReset}},
					providertest.Response{Text: []string{"one", " two", " three"}, Cut: &providertest.Cut{After: 2, How: how}})
				before := mustCall(t, url, chatBody(`"stream":true`))
				if before.status != 200 || before.provider != "p1" {
					t.Fatalf("cut before output: %d from %q", before.status, before.provider)
				}
				after := mustCall(t, url, chatBody(`"stream":true,"stream_options":{"include_usage":true}`))
				if after.status != 200 || after.provider != "aws" {
					t.Fatalf("cut after output: %d from %q", after.status, after.provider)
				}
				var text strings.Builder
				finish, usage := "", false
				for ev := range strings.SplitSeq(after.body, "\n\n") {
					var ch struct {
						Choices []struct {
							Delta        struct{ Content string } `json:"delta"`
							FinishReason *string                  `json:"finish_reason"`
						} `json:"choices"`
						Usage json.RawMessage `json:"usage"`
					}
					if json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &ch) != nil {
						continue
					}
					for _, c := range ch.Choices {
						text.WriteString(c.Delta.Content)
						if c.FinishReason != nil {
							finish = *c.FinishReason
						}
					}
					usage = usage || (len(ch.Usage) > 0 && string(ch.Usage) != "null")
				}
				if text.String() != "one two" || finish != "error" || !usage {
					t.Errorf("cut %d after output: text %q, finish %q, usage %v:\n%s", how, text.String(), finish, usage, after.body)
				}
				if bedrock.Calls() != 2 || openai.Calls() != 1 {
					t.Errorf("cut %d: calls Bedrock %d, OpenAI %d; want 2, 1 (no fallback after output)", how, bedrock.Calls(), openai.Calls())
				}
			}
		})
	}
}

// TestBedrockConverseFromMessages: a Messages client (a Claude Code-shaped
// turn) on a Converse route is translated to Converse directly, so what the
// two share reaches the model: cache_control becomes cache points after the
// cached system block, message block and tool; thinking with its signature
// becomes reasoning content; tool use and results carry their ids. The
// answer comes back as an Anthropic event stream, priced from Converse's
// usage, and the hints left out are named in x-gateway-dropped.
func TestBedrockConverseFromMessages(t *testing.T) {
	url, bedrock, _, _, _ := bedrockFirstModel(t, novaModel)
	body := `{"model":"m","max_tokens":1024,"stream":true,
		"system":[{"type":"text","text":"You are a coding agent."},{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"Print a word."}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"I will print it.","signature":"sig-123"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hi"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"hi","cache_control":{"type":"ephemeral"}}]}],
		"tools":[{"name":"Bash","description":"Run a command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}],
		"metadata":{"user_id":"u-1"}}`
	a := callPath(t, url+"/api/v1/messages", body, "anthropic-version", "2023-06-01")
	if a.status != 200 || a.provider != "aws" {
		t.Fatalf("%d from %q: %s", a.status, a.provider, a.body)
	}
	var names []string
	for ev := range strings.SplitSeq(a.body, "\n\n") {
		if name, ok := strings.CutPrefix(ev, "event: "); ok {
			names = append(names, name[:strings.IndexByte(name+"\n", '\n')])
		}
	}
	want := "message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want || !strings.Contains(a.body, `"text":" world"`) || !strings.Contains(a.body, `"cost":`) {
		t.Errorf("events %s, want %s:\n%s", got, want, a.body)
	}
	if d := a.header.Get("X-Gateway-Dropped"); !strings.Contains(d, "metadata") {
		t.Errorf("x-gateway-dropped %q, want metadata named", d)
	}
	if bedrock.Calls() != 1 {
		t.Fatalf("%d Bedrock calls", bedrock.Calls())
	}
	req := bedrock.Requests()[0]
	if req.Path != "/model/"+novaModel+providertest.ConverseStreamSuffix {
		t.Errorf("Bedrock call %s", req.Path)
	}
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if got := j(req.JSON["system"]); got != `[{"text":"You are a coding agent."},{"text":"Be terse."},{"cachePoint":{"type":"default"}}]` {
		t.Errorf("system %s", got)
	}
	msgs, _ := req.JSON["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages %s", j(req.JSON["messages"]))
	}
	if got := j(msgs[1]); !strings.Contains(got, `"reasoningContent":{"reasoningText":{"signature":"sig-123","text":"I will print it."}}`) ||
		!strings.Contains(got, `"toolUse":{"input":{"command":"echo hi"},"name":"Bash","toolUseId":"toolu_1"}`) {
		t.Errorf("assistant turn %s", got)
	}
	if got := j(msgs[2]); !strings.Contains(got, `"toolResult":{"content":[{"text":"hi"}],"toolUseId":"toolu_1"}`) || !strings.HasSuffix(got, `{"cachePoint":{"type":"default"}}],"role":"user"}`) {
		t.Errorf("tool result turn %s", got)
	}
	if got := j(req.JSON["toolConfig"]); !strings.Contains(got, `{"cachePoint":{"type":"default"}}`) || !strings.Contains(got, `"name":"Bash"`) {
		t.Errorf("toolConfig %s", got)
	}
}

// TestCountTokensPassesOverBedrock: Claude on Bedrock has no count_tokens
// call, so the adapter over Bedrock declares no token counter; a model
// whose first route is Claude on Bedrock and whose second is Anthropic's
// API has its tokens counted by the second, and Bedrock is never called.
func TestCountTokensPassesOverBedrock(t *testing.T) {
	bedrock, claude := providertest.NewBedrock(t), providertest.NewAnthropic(t)
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: aws, api: bedrock, aws_region: %s, base_url: %q}
  - {name: claude, api: anthropic, base_url: %q}
models:
  - id: m
    routes:
      - {provider: aws, model: %q, input_price: 1, output_price: 2}
      - {provider: claude, model: claude-x, input_price: 1, output_price: 2}
projects:
  - id: proj
    keys: [{key: %s}]
`, providertest.BedrockRegion, bedrock.URL(), claude.URL(), bedrockClaude, testKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), AWSCredentials: bedrockCredentials})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	claude.ScriptCountTokens(providertest.Response{Body: `{"input_tokens":42}`})
	got := countTokens(t, srv.URL, countBody+"}")
	if got.status != 200 || got.body != `{"input_tokens":42}` || got.provider != "claude" || got.depth != "1" ||
		got.header.Get("X-Gateway-Estimated") != "" {
		t.Errorf("count_tokens: %d %s from %q at depth %s, estimated %q; want claude's count at depth 1",
			got.status, got.body, got.provider, got.depth, got.header.Get("X-Gateway-Estimated"))
	}
	if n, b := len(claude.CountTokensRequests()), bedrock.Calls(); n != 1 || b != 0 {
		t.Errorf("%d count_tokens calls to claude, %d calls to Bedrock; want 1 and 0", n, b)
	}
}
