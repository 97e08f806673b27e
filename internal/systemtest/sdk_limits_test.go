//go:build integration

package systemtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestNodeSDKStreamCost pins what docs/compatibility.md says of the Node
// SDKs' stream helpers: @anthropic-ai/sdk's finalMessage() leaves out
// usage.cost, which the raw message_delta event carries; openai's
// finalChatCompletion() and finalResponse() keep it. When an SDK version
// changes either, this fails and the doc's "Known limits of the SDKs" must
// change with it.
func TestNodeSDKStreamCost(t *testing.T) {
	g := newGateway(t, setup{})
	var got struct {
		Messages struct {
			FinalCost *float64 `json:"final_cost"`
			DeltaCost *float64 `json:"delta_cost"`
		}
		ChatFinalCost      *float64 `json:"chat_final_cost"`
		ResponsesFinalCost *float64 `json:"responses_final_cost"`
	}
	runNodeSDK(t, "stream_cost.mjs", g.url, &got)
	// providertest: 10 prompt tokens, 2 completion tokens; p0 costs 1/M in, 2/M out.
	const cost = 1.4e-05
	if m := got.Messages; m.FinalCost != nil || m.DeltaCost == nil || *m.DeltaCost != cost {
		t.Errorf("@anthropic-ai/sdk stream: finalMessage().usage.cost %v, message_delta's usage.cost %v; the doc says absent and %v", m.FinalCost, m.DeltaCost, cost)
	}
	if c := got.ChatFinalCost; c == nil || *c != cost {
		t.Errorf("openai finalChatCompletion().usage.cost %v, want %v", c, cost)
	}
	if c := got.ResponsesFinalCost; c == nil || *c != cost {
		t.Errorf("openai finalResponse().usage.cost %v, want %v", c, cost)
	}
}

// TestGoSDKStreamCost pins the same for anthropic-sdk-go: Message.Accumulate
// leaves usage.cost out of the accumulated message, while the
// message_delta event's usage carries it (in its JSON's extra fields).
func TestGoSDKStreamCost(t *testing.T) {
	g := newGateway(t, setup{})
	client := anthropicClient(g.url)
	stream := client.Messages.NewStreaming(context.Background(), messageParams())
	defer stream.Close()
	var acc anthropic.Message
	deltaCost := ""
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "message_delta" {
			if f, ok := ev.Usage.JSON.ExtraFields["cost"]; ok {
				deltaCost = f.Raw()
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_, accHas := acc.Usage.JSON.ExtraFields["cost"]
	if accHas || strings.Contains(acc.Usage.RawJSON(), `"cost"`) || deltaCost != "0.000014" {
		t.Errorf("anthropic-sdk-go stream: accumulated usage %s (cost kept: %v), message_delta's cost %q; the doc says left out and 0.000014", acc.Usage.RawJSON(), accHas, deltaCost)
	}
}

// TestGoOpenAISDKStreamCost: openai-go's ChatCompletionAccumulator
// leaves the usage chunk's cost out of the accumulated completion, while
// the usage chunk itself carries it (in its JSON extra fields).
func TestGoOpenAISDKStreamCost(t *testing.T) {
	g := newGateway(t, setup{})
	r := readSDKStream(t, sdkClient(g).Chat.Completions.NewStreaming(sdkContext(t), sdkStreamParams()))
	if r.err != nil {
		t.Fatal(r.err)
	}
	_, accHas := usageCost(r.acc.Usage)
	u, n := r.usageChunk()
	chunkCost, chunkHas := usageCost(u.Usage)
	if accHas || n != 1 || !chunkHas || chunkCost != 1.4e-05 {
		t.Errorf("openai-go stream: accumulated usage %q (cost kept: %v), usage chunk %s; the doc says left out and 1.4e-05", r.acc.Usage.RawJSON(), accHas, u.RawJSON())
	}
}
