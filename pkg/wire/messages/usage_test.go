package messages

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// TestUsageServerToolsAndOneHourCache: the usage of a passed-through and of
// a translated stream carries what Anthropic bills beyond tokens: the
// server tool calls (usage.server_tool_use, cumulative in message_delta)
// and the part of the cache writes that went to the one-hour cache.
func TestUsageServerToolsAndOneHourCache(t *testing.T) {
	events := []string{
		`{"type":"message_start","message":{"id":"m","model":"c","content":[],"usage":{"input_tokens":12,"cache_creation_input_tokens":1100,"cache_read_input_tokens":9000,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":1000},"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3,"server_tool_use":{"web_search_requests":1}}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40,"server_tool_use":{"web_search_requests":3,"web_fetch_requests":0}}}`,
		`{"type":"message_stop"}`,
	}
	var o Observer
	d := NewDecoder(1)
	for _, ev := range events {
		if _, err := o.Observe("", []byte(ev)); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Decode("", []byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	for name, u := range map[string]*llm.Usage{"observer": o.UsageSoFar(), "decoder": d.UsageSoFar()} {
		if u == nil {
			t.Fatalf("%s: no usage", name)
		}
		if diff := cmp.Diff(map[string]int{"web_search": 3}, u.ServerToolCalls); diff != "" {
			t.Errorf("%s: tool calls (-want +got):\n%s", name, diff)
		}
		if _, read, write := u.PromptParts(); read != 9000 || write != 1100 || u.CacheWrite1h() != 1000 || u.CompletionTokens != 40 {
			t.Errorf("%s: usage %+v", name, *u)
		}
	}
}
