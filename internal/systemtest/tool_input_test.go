package systemtest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestMessagesConflictForAnotherToolInput: a Messages request's earlier
// tool_use input reaches the model as text (the tool call's arguments), in
// its canonical form, the one the Idempotency-Key fingerprint covers. So a
// retry that spells the input otherwise (1e2 for 100) shows the model the
// same text and is rightly replayed, and one with another value is a 409.
// Before, the model was shown the input as written: 1e2 and 100 had one
// fingerprint but were two prompts, and the second was replayed the first
// one's answer.
func TestMessagesConflictForAnotherToolInput(t *testing.T) {
	g := newGateway(t, setup{providers: 1})
	// The fake model answers with the tool call arguments it was shown.
	g.ups[0].SetHandler(func(call int, req providertest.Request) providertest.Response {
		var body struct {
			Messages []struct {
				ToolCalls []struct {
					Function struct{ Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		json.Unmarshal(req.Body, &body)
		seen := "none"
		for _, m := range body.Messages {
			for _, c := range m.ToolCalls {
				seen = c.Function.Arguments
			}
		}
		return providertest.Response{Text: []string{"model saw " + seen}}
	})
	post := func(input string) answer {
		body := `{"model":"m","max_tokens":50,"messages":[
			{"role":"user","content":"pay invoice 17"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"pay","input":` + input + `}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"},{"type":"text","text":"what did you pay?"}]}]}`
		return callPath(t, g.url+"/api/v1/messages", body,
			"Authorization", "", "X-Api-Key", testKey, "Anthropic-Version", "2023-06-01", "Idempotency-Key", key(t))
	}
	first := post(`{"amount":1e2}`)
	if first.status != 200 || !strings.Contains(first.body, `model saw {\"amount\":100}`) {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	same := post(`{"amount":100}`)
	if same.status != 200 || same.replayed != "true" || same.body != first.body {
		t.Errorf("the same input spelt otherwise: %d replayed=%q %s; want the replay", same.status, same.replayed, same.body)
	}
	other := post(`{"amount":101}`)
	if other.status != 409 || other.code != "idempotency_conflict" {
		t.Errorf("another input under the key: %d replayed=%q %s; want 409 idempotency_conflict", other.status, other.replayed, other.body)
	}
	if n := g.ups[0].Calls(); n != 1 {
		t.Errorf("upstream calls %d, want 1", n)
	}
}
