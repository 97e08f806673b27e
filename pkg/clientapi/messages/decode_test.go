package messages

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	messageswire "github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// TestDecodeMessagesGatewayObjects checks that the gateway-owned objects
// reach llm.DecodeChatRequest as they were.
func TestDecodeMessagesGatewayObjects(t *testing.T) {
	in := `{"model":"m:nitro","max_tokens":5,"messages":[{"role":"user","content":"q"}],
		"gateway":{"retry":{"max_attempts_per_route":2},"routing":{"allow_fallbacks":false}},"provider":{"only":["x"],"data_collection":"deny"}}`
	chat, err := decodeMessages([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	req, err := llm.DecodeChatRequest(chat)
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "m" || req.Suffix != ":nitro" || req.Gateway.MaxAttemptsPerRoute != 2 || router.TargetOf(req).AllowFallbacks() ||
		!cmp.Equal(req.Provider.Only, []string{"x"}) || req.Provider.DataCollection != "deny" {
		t.Errorf("decoded %+v", req)
	}
	// A bad gateway object is DecodeChatRequest's to report, under the same
	// param.
	chat, err = decodeMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}],"gateway":{"retry":{"max_total_attempts":99}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = llm.DecodeChatRequest(chat)
	var e *llm.Error
	if !errors.As(err, &e) || e.Param != "gateway.retry.max_total_attempts" {
		t.Errorf("DecodeChatRequest: %v, want param gateway.retry.max_total_attempts", err)
	}
}

// TestDecodeMessagesRoundTrip checks that a Messages request routed to an
// Anthropic upstream arrives as the client wrote it: Messages → Chat
// Completions (decodeMessages) → the upstream body → Messages
// (the anthropic adapter, against a fake Anthropic API).
func TestDecodeMessagesRoundTrip(t *testing.T) {
	in := `{"model":"claude","max_tokens":300,"system":"be brief","temperature":0.25,"top_k":5,"stop_sequences":["END"],
		"metadata":{"user_id":"u1"},"stream":false,
		"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
		"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
		"messages":[
			{"role":"user","content":[{"type":"text","text":"weather?"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}]},
			{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},{"type":"text","text":"and tomorrow?"}]}]}`
	chat, err := decodeMessages([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	req, err := llm.DecodeChatRequest(chat)
	if err != nil {
		t.Fatal(err)
	}
	up, err := req.UpstreamBody("claude-up")
	if err != nil {
		t.Fatal(err)
	}
	back, err := anthropicBody(t, "claude-up", up)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude-up","max_tokens":300,"system":"be brief","stream":true,"temperature":0.25,"top_k":5,"stop_sequences":["END"],
		"metadata":{"user_id":"u1"},
		"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
		"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
		"messages":[
			{"role":"user","content":[{"type":"text","text":"weather?"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}]},
			{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},{"type":"text","text":"and tomorrow?"}]}]}`
	if diff := cmp.Diff(reqtest.DecodeJSON(t, []byte(want)), reqtest.DecodeJSON(t, back)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s\ngot %s", diff, back)
	}
}

// decodeMessages is messageswire.ToHub without the hints.
func decodeMessages(body []byte) (chat []byte, err error) {
	hub, _, err := messageswire.ToHub(body)
	return hub.Bytes(), err
}
