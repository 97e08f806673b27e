package messages

import (
	"testing"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

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

// TestHubRequest: the request read from the members ToHub wrote is the
// one llm.DecodeChatRequest decodes from its body, error for error, for
// every body whose members llm.RequestMembers splits (as the gateway
// reads an unkeyed request's).
func TestHubRequest(t *testing.T) {
	reqtest.TestHub(t, reqtest.HubBodies(t, append(toHubSeeds, hubSeeds...), "FuzzToHub", "claude-code"), hubOf, 120, 50)
}

// FuzzHubRequest is TestHubRequest on any body.
func FuzzHubRequest(f *testing.F) {
	for _, b := range reqtest.HubBodies(f, append(toHubSeeds, hubSeeds...), "FuzzToHub", "claude-code") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) { _, _ = reqtest.CheckHub(t, body, hubOf) })
}

// hubOf is ToHub's hub of body.
func hubOf(body []byte) (llm.Hub, bool) {
	hub, _, err := ToHub(body)
	return hub, err == nil
}
