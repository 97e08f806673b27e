//go:build integration

package systemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/codexcli"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

const codexEncrypted = "gAAAAB-scripted-encrypted-content-7f3a"

// codexGateway serves model m from one route to upstream (a provider of
// the given api at baseURL), and records every body a client posts to it.
func codexGateway(t *testing.T, api, baseURL string) (url string, sent func() [][]byte) {
	t.Helper()
	var mu sync.Mutex
	var bodies [][]byte
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if r.Method == http.MethodPost {
				mu.Lock()
				bodies = append(bodies, b)
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			next.ServeHTTP(w, r)
		})
	}
	return oneRouteGateway(t, api, baseURL, record), func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

func runCodex(t *testing.T, url, prompt string) codexcli.Result {
	t.Helper()
	bin, err := codexcli.Binary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := codexcli.Run(context.Background(), codexcli.Options{
		Binary: bin, BaseURL: url + "/api/v1", APIKey: testKey, Model: "m",
		Prompt: prompt, Dir: t.TempDir(), Timeout: 2 * time.Minute,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("codex exec: exit %d, %v\nstdout:\n%s\nstderr:\n%s", res.ExitCode, err, res.Stdout, res.Stderr)
	}
	return res
}

const codexPrompt = "Run `echo buzzgate-codex-ok` and tell me what it printed."

// TestCodexOnResponsesRoute runs Codex CLI through the gateway on an
// openai-responses route: one turn with a shell round trip. The upstream
// gets each request as Codex sent it (the route's model in place of the
// client's), and the reasoning item's encrypted_content comes back to it on
// the second turn.
func TestCodexOnResponsesRoute(t *testing.T) {
	f := codexcli.NewFake(t)
	final := `The command printed "buzzgate-codex-ok".`
	f.Script(
		codexcli.Response{ID: "resp_turn1", Items: []codexcli.Item{
			codexcli.Reasoning("rs_scripted1", codexEncrypted, "Running the command."),
			codexcli.FunctionCall("fc_scripted1", "call_scripted1", "exec_command", `{"cmd":"echo buzzgate-codex-ok"}`),
		}, Usage: codexcli.Usage{InputTokens: 9000, OutputTokens: 40, ReasoningTokens: 16}},
		codexcli.Response{ID: "resp_turn2", Items: []codexcli.Item{codexcli.Message("msg_scripted1", final)},
			Usage: codexcli.Usage{InputTokens: 9100, CachedTokens: 9000, OutputTokens: 12}},
	)
	url, sent := codexGateway(t, "openai-responses", f.URL())
	res := runCodex(t, url, codexPrompt)
	if !strings.Contains(res.LastMessage, final) {
		t.Errorf("codex's final message %q, want it to hold %q", res.LastMessage, final)
	}
	bodies, ups := sent(), f.Requests()
	if len(bodies) != 2 || len(ups) != 2 {
		t.Fatalf("codex sent %d requests, the upstream got %d; want 2 and 2", len(bodies), len(ups))
	}
	for i := range bodies {
		sameMembers(t, ups[i].Body, bodies[i], map[string]string{"model": `"up-model"`, "stream": "true"})
	}
	var turn2 struct {
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(ups[1].Body, &turn2); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(turn2.Input, func(m map[string]any) bool { return m["type"] == "reasoning" })
	if i < 0 || turn2.Input[i]["encrypted_content"] != codexEncrypted {
		t.Errorf("turn 2 did not send the reasoning item's encrypted_content back: %.500s", ups[1].Body)
	}
	out := slices.IndexFunc(turn2.Input, func(m map[string]any) bool { return m["type"] == "function_call_output" })
	if out < 0 || !strings.Contains(fmt.Sprint(turn2.Input[out]["output"]), "buzzgate-codex-ok") {
		t.Errorf("turn 2 has no function_call_output with the command's output")
	}
}

// TestCodexOnChatRoute runs Codex CLI through the gateway on an openai
// (Chat Completions) route: its Responses requests are translated, the
// scripted upstream asks for exec_command, and the turn completes with the
// text quoting the command's output.
func TestCodexOnChatRoute(t *testing.T) {
	up := providertest.New(t)
	final := "The command printed buzzgate-codex-ok."
	up.Script(
		providertest.Response{ToolCall: &providertest.ToolCall{ID: "call_1", Name: "exec_command", Arguments: `{"cmd":"echo buzzgate-codex-ok"}`}, FinishReason: "tool_calls"},
		providertest.Response{Text: []string{final}},
	)
	url, _ := codexGateway(t, "openai", up.URL())
	res := runCodex(t, url, codexPrompt)
	if !strings.Contains(res.LastMessage, final) {
		t.Errorf("codex's final message %q, want it to hold %q", res.LastMessage, final)
	}
	if up.Calls() != 2 {
		t.Fatalf("upstream calls %d, want 2", up.Calls())
	}
	msgs, _ := up.Requests()[1].JSON["messages"].([]any)
	if !strings.Contains(fmt.Sprint(msgs), "buzzgate-codex-ok") {
		t.Errorf("turn 2 did not carry the command's output to the upstream")
	}
}
