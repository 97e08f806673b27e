package reqtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// HubVariants are top-level members set on a request to vary what the
// hub's Chat Completions form is read for: the model and its suffix, the
// stream, the gateway-owned objects (valid, refused, spaced, escaped,
// with a name given twice).
var HubVariants = []map[string][]byte{
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

// HubBodies are the bodies a translation's differential test of its hub
// reads: seeds, the calling package's fuzz corpus testdata/fuzz/corpus,
// and the recorded requests of agent (AgentBodies), each with every one
// of HubVariants.
func HubBodies(t testing.TB, seeds []string, corpus, agent string) [][]byte {
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
	base = append(base, AgentBodies(t, agent)...)
	var out [][]byte
	for _, b := range base {
		for _, v := range HubVariants {
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

// HubOf is a translation's hub for a client's body, and whether the body
// translated.
type HubOf func(body []byte) (llm.Hub, bool)

// TestHub runs CheckHub on each of bodies that llm.RequestMembers splits
// (as the gateway reads an unkeyed request's) and hub translates, and
// fails t unless at least read of them read as a request and refused of
// them were refused after the translation, so that both ways are tested.
func TestHub(t *testing.T, bodies [][]byte, hub HubOf, read, refused int) {
	t.Helper()
	n, r := 0, 0
	for _, body := range bodies {
		switch translated, ok := CheckHub(t, body, hub); {
		case translated && ok:
			n++
		case translated:
			r++
		}
	}
	if n < read || r < refused {
		t.Fatalf("%d bodies translated and read, %d refused after the translation; want at least %d and %d", n, r, read, refused)
	}
}

// CheckHub fails t unless the request read from the members hub's
// translation of body wrote (llm.Hub.Request) is the one
// llm.DecodeChatRequest decodes from its Chat Completions body, error for
// error. translated says whether there was a translation to compare (a
// body llm.RequestMembers splits, which hub translates), ok whether the
// two read a request.
func CheckHub(t *testing.T, body []byte, hub HubOf) (translated, ok bool) {
	t.Helper()
	if _, err := llm.RequestMembers(body); err != nil {
		return false, false
	}
	h, translated := hub(body)
	if !translated {
		return false, false
	}
	want, wantErr := llm.DecodeChatRequest(h.Bytes())
	got, gotErr := h.Request(true)
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
