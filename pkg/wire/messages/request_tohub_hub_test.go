package messages

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// hubVariants are top-level members set on a request to vary what the
// hub's Chat Completions form is read for: the model and its suffix, the
// stream, the gateway-owned objects (valid, refused, spaced, escaped,
// with a name given twice).
var hubVariants = []map[string][]byte{
	nil,
	{"model": []byte(`"m:nitro"`)},
	{"model": []byte(`"` + string(bytes.Repeat([]byte("x"), 300)) + `"`)},
	{"model": []byte(`"caf\u00e9 <&>"`)},
	{"stream": []byte(`true`)},
	{"stream": []byte(`false`)},
	{"gateway": []byte(`{"retry":{"max_attempts_per_route":2,"backoff":"250ms"},"routing":{"allow_fallbacks":false}}`)},
	{"gateway": []byte(` { "retry" : { "max_total_attempts" : 99 } } `)},
	{"gateway": []byte(`{"retry":{"max_total_attempts":2,"max_total_attempts":3}}`)},
	{"gateway": []byte(`{"ret\u0072y":{}}`)},
	{"gateway": []byte(`null`)},
	{"gateway": []byte(`[]`)},
	{"provider": []byte(`{"order":["a","b"],"zdr":true,"data_collection":"deny","sort":"latency"}`)},
	{"provider": []byte(`{"only":[1]}`)},
	{"provider": []byte(`{"sort":"price","sort":"latency"}`)},
	{"provider": []byte(`{"allow_fallbacks":"no"}`)},
	{"gateway": []byte(`{}`), "provider": []byte(`{"ignore":["x"]}`), "stream": []byte(`true`)},
}

// hubSeeds are requests beside toHubSeeds with what else the translation
// writes or leaves out.
var hubSeeds = []string{
	`{"model":"m","max_tokens":5,"messages":[]}`,
	`{"model":"m","max_tokens":5,"system":"","messages":[]}`,
	`{"model":"m","max_tokens":5,"system":"s","messages":[]}`,
	`{"model":"m","max_tokens":1e3,"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}],"service_tier":"auto","container":"c","metadata":{"user_id":null}}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":[{"type":"text","text":"x"}]},{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://e/x.png"}}]}]}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"a"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"r","is_error":true}]}]}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"thinking":{"type":"adaptive"},"output_config":{"effort":"max","format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","description":"d","input_schema":{"type":"object","properties":{"x":{"type":"integer"}}},"strict":true}],"tool_choice":{"type":"any"}}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"tool_choice":{"type":"auto"},"stop_sequences":[],"temperature":1.0,"top_p":1e-1,"top_k":0}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"}}`,
	` {"model":"m","max_tokens":5,"messages":[{"role":"user","content":"\u00e9\ud83d\ude00 <b>&"}]} `,
}

// hubBodies are the bodies the differential tests read: the seeds, the
// fuzz corpus and the recorded agents' requests, each with every variant.
func hubBodies(t testing.TB, seeds []string, corpus, agent string) [][]byte {
	var base [][]byte
	for _, s := range seeds {
		base = append(base, []byte(s))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", corpus, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A corpus file: "go test fuzz v1" and one []byte("...") line.
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			var s string
			if _, err := fmt.Sscanf(string(bytes.TrimSpace(b[i+1:])), "[]byte(%q)", &s); err == nil {
				base = append(base, []byte(s))
			}
		}
	}
	base = append(base, reqtest.AgentBodies(t, agent)...)
	var out [][]byte
	for _, b := range base {
		for _, v := range hubVariants {
			if v == nil {
				out = append(out, b)
				continue
			}
			if vb, err := llm.SetTopLevel(b, v); err == nil {
				out = append(out, vb)
			}
		}
	}
	return out
}

// TestHubRequest: the request read from the members ToHub wrote is the
// one llm.DecodeChatRequest decodes from its body, error for error, for
// every body whose members llm.RequestMembers splits (as the gateway
// reads an unkeyed request's).
func TestHubRequest(t *testing.T) {
	n, refused := 0, 0
	for _, body := range hubBodies(t, append(toHubSeeds, hubSeeds...), "FuzzToHub", "claude-code") {
		switch translated, ok := checkHubRequest(t, body); {
		case translated && ok:
			n++
		case translated:
			refused++
		}
	}
	if n < 120 || refused < 50 {
		t.Fatalf("%d bodies translated and read, %d refused after the translation; want at least 120 and 50", n, refused)
	}
}

// FuzzHubRequest is TestHubRequest on any body.
func FuzzHubRequest(f *testing.F) {
	for _, b := range hubBodies(f, append(toHubSeeds, hubSeeds...), "FuzzToHub", "claude-code") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) { _, _ = checkHubRequest(t, body) })
}

// checkHubRequest compares the two readings of body's translation, when
// there is one (translated); ok says whether they read a request.
func checkHubRequest(t *testing.T, body []byte) (translated, ok bool) {
	t.Helper()
	if _, err := llm.RequestMembers(body); err != nil {
		return false, false
	}
	hub, _, err := ToHub(body)
	if err != nil {
		return false, false
	}
	want, wantErr := llm.DecodeChatRequest(hub.Bytes())
	got, gotErr := hub.Request(true)
	if diff := cmp.Diff(hubRequestOf(want, wantErr), hubRequestOf(got, gotErr)); diff != "" {
		t.Fatalf("%s\nread from its members (-decoded +read):\n%s", body, diff)
	}
	return true, wantErr == nil
}

// hubRequestOf is what the gateway reads of a request, or its error.
func hubRequestOf(r *llm.ChatRequest, err error) map[string]any {
	if err != nil {
		return map[string]any{"error": fmt.Sprintf("%T %v", err, err), "param": llm.AsError(err).Param}
	}
	up, upErr := r.UpstreamBody("up")
	out := map[string]any{
		"model": r.Model, "suffix": r.Suffix, "stream": r.Stream, "include_usage": r.IncludeUsage,
		"gateway": r.Gateway, "provider": r.Provider,
		"size": r.Size(), "upstream": string(up), "upstream_error": fmt.Sprint(upErr),
		"native": r.Native != nil, "chat_err": fmt.Sprint(r.ChatErr), "dropped": r.Dropped,
	}
	for _, name := range []string{"max_completion_tokens", "max_tokens", "n", "service_tier", "web_search_options", "audio", "modalities"} {
		v, ok := r.Field(name)
		out["field "+name] = fmt.Sprint(string(v), ok)
	}
	return out
}
