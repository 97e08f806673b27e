package responses

import (
	"testing"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// hubSeeds are requests beside rsSeeds with what else the translation
// writes or leaves out.
var hubSeeds = []string{
	`{"model":"m","input":[]}`,
	`{"model":"m","input":[{"type":"reasoning","summary":[]}]}`,
	`{"model":"m","instructions":"","input":"q","max_output_tokens":16,"service_tier":"auto","prompt_cache_key":"k","stream_options":{"include_obfuscation":false}}`,
	`{"model":"m","input":[{"role":"system","content":[{"type":"input_text","text":"x"}]},{"role":"user","content":[{"type":"input_image","image_url":"https://e/x.png"}]}],"tools":[{"type":"web_search"},{"type":"function","name":"f","description":"d","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}],"tool_choice":"required"}`,
	`{"model":"m","input":"q","reasoning":{"effort":"high","summary":"auto"},"text":{"verbosity":"high"},"temperature":1.0,"top_p":1e-1,"store":true,"metadata":{}}`,
	`{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"a"},{"type":"function_call_output","call_id":"c2","output":"b"}],"tools":[{"type":"function","name":"f"}],"parallel_tool_calls":true}`,
	`{"model":"m","previous_response_id":"resp_2","input":"next"}`,
	` {"model":"m","input":"\u00e9\ud83d\ude00 <b>&"} `,
}

// TestHubRequest: the request read from the members ToHub wrote (or, for
// a request that continues a kept turn, Preview) is the one
// llm.DecodeChatRequest decodes from its body, error for error, for every
// body whose members llm.RequestMembers splits (as the gateway reads an
// unkeyed request's).
func TestHubRequest(t *testing.T) {
	reqtest.TestHub(t, reqtest.HubBodies(t, append(rsSeeds, hubSeeds...), "FuzzDecodeResponses", "codex"), hubOf, 120, 50)
}

// FuzzHubRequest is TestHubRequest on any body.
func FuzzHubRequest(f *testing.F) {
	for _, b := range reqtest.HubBodies(f, append(rsSeeds, hubSeeds...), "FuzzDecodeResponses", "codex") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) { _, _ = reqtest.CheckHub(t, body, hubOf) })
}

// hubOf is ToHub's hub of body or, for a request that continues a kept
// turn, Preview's.
func hubOf(body []byte) (llm.Hub, bool) {
	r, err := ToHub(body, nil)
	if err != nil {
		return llm.Hub{}, false
	}
	if r.PreviousResponseID == "" {
		return r.Hub, true
	}
	hub, err := r.Preview()
	return hub, err == nil
}
