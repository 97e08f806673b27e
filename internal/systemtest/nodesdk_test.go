//go:build integration

package systemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// envNodeSDKs names the environment variable holding the node_modules
// directory with the official Node SDKs (openai, @anthropic-ai/sdk) that
// `make tools` installs; by default .tools/sdks/node_modules under the module
// root.
const envNodeSDKs = "BUZZGATE_NODE_SDKS"

const nodeSDKsMissing = "the official Node SDKs are not installed: run `make tools` (make test installs them)"

// nodeSDKs finds the SDKs' node_modules directory and node, failing the test
// (never skipping it) when either is missing.
func nodeSDKs(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := proc.Tool(envNodeSDKs, filepath.Join(".tools", "sdks", "node_modules"), nodeSDKsMissing)
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		t.Fatalf("%s (%v)", nodeSDKsMissing, err)
	}
	for _, pkg := range []string{"openai", "@anthropic-ai/sdk"} {
		if _, err := os.Stat(filepath.Join(dir, pkg, "package.json")); err != nil {
			t.Fatalf("%s (%s=%s: %v)", nodeSDKsMissing, envNodeSDKs, dir, err)
		}
	}
	node, err = exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH (%v); the Node SDK tests need it", err)
	}
	return node, dir
}

// runNodeSDK runs testdata/nodesdk/<script> against the gateway at url and
// decodes the one JSON line it prints into out.
func runNodeSDK(t *testing.T, script, url string, out any) {
	t.Helper()
	node, dir := nodeSDKs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "nodesdk", script), url, testKey)
	cmd.Env = append(os.Environ(), envNodeSDKs+"="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node %s printed %q: %v\nstderr: %s", script, stdout.String(), err, stderr.String())
	}
	t.Logf("node %s: %s", script, strings.TrimSpace(stdout.String()))
}

// TestNodeSDKChat drives Chat Completions with the official openai Node SDK
// (v6): a completion with usage.cost, a stream and a keyed replay.
func TestNodeSDKChat(t *testing.T) {
	g := newGateway(t, setup{})
	var got struct {
		Create struct {
			ID, Text, Finish string
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			Cost             *float64
		}
		Stream struct {
			Text, Finish string
			Cost         *float64
		}
		Replay struct {
			First, Again  string
			FirstReplayed *string `json:"first_replayed"`
			AgainReplayed *string `json:"again_replayed"`
		}
	}
	runNodeSDK(t, "openai_chat.mjs", g.url, &got)
	c := got.Create
	// providertest: 10 prompt tokens, 2 completion tokens; p0 costs 1/M in, 2/M out.
	if c.ID == "" || c.Text != "Hello world" || c.Finish != "stop" || c.PromptTokens != 10 || c.CompletionTokens != 2 || c.Cost == nil || *c.Cost != 1.4e-05 {
		t.Errorf("completion: %+v (cost %v)", c, c.Cost)
	}
	if s := got.Stream; s.Text != "Hello world" || s.Finish != "stop" || s.Cost == nil || *s.Cost != 1.4e-05 {
		t.Errorf("stream: %+v", s)
	}
	if r := got.Replay; r.First == "" || r.Again != r.First || r.FirstReplayed != nil || r.AgainReplayed == nil || *r.AgainReplayed != "true" {
		t.Errorf("replay: %+v", r)
	}
	if calls := g.ups[0].Calls(); calls != 3 || g.ups[1].Calls() != 0 {
		t.Errorf("upstream calls p0=%d p1=%d, want 3 and 0 (the replay calls none)", calls, g.ups[1].Calls())
	}
}

// TestNodeSDKResponses drives the Responses API with the official openai Node
// SDK: a response with usage.cost, a stream up to response.completed, a
// previous_response_id continuation and an unknown previous_response_id.
func TestNodeSDKResponses(t *testing.T) {
	g := newGateway(t, setup{})
	type unknown struct {
		Class    string
		Instance bool
		Status   int
		Body     struct{ Type, Code, Param string }
	}
	var got struct {
		Create struct {
			ID, Status, Text string
			OutputTokens     int `json:"output_tokens"`
			Cost             *float64
		}
		Stream struct {
			Types     []string
			Seq       []int
			Text      string
			Completed *struct {
				Status, Text string
				OutputTokens int `json:"output_tokens"`
			}
		}
		Next    struct{ ID, Previous, Text string }
		Unknown unknown
	}
	runNodeSDK(t, "openai_responses.mjs", g.url, &got)
	c := got.Create
	if !strings.HasPrefix(c.ID, "resp_") || c.Status != "completed" || c.Text != "Hello world" || c.OutputTokens != 2 || c.Cost == nil || *c.Cost != 1.4e-05 {
		t.Errorf("response: %+v (cost %v)", c, c.Cost)
	}
	s := got.Stream
	if len(s.Types) < 3 || s.Types[0] != "response.created" || s.Types[len(s.Types)-1] != "response.completed" || s.Text != "Hello world" ||
		s.Completed == nil || s.Completed.Status != "completed" || s.Completed.Text != "Hello world" || s.Completed.OutputTokens != 2 {
		t.Errorf("stream: %+v", s)
	}
	for i, n := range s.Seq {
		if n != i {
			t.Errorf("stream sequence_numbers %v, want 0, 1, 2, ...", s.Seq)
			break
		}
	}
	if n := got.Next; !strings.HasPrefix(n.ID, "resp_") || n.ID == c.ID || n.Previous != c.ID || n.Text != "Hello world" {
		t.Errorf("continuation: %+v", n)
	}
	if u := got.Unknown; !u.Instance || u.Status != 400 || u.Body.Param != "previous_response_id" {
		t.Errorf("an unknown previous_response_id: %+v", u)
	}
	// The continuation's upstream request holds the whole conversation; the
	// unknown previous_response_id reached no upstream.
	reqs := g.ups[0].Requests()
	if len(reqs) != 3 || g.ups[1].Calls() != 0 {
		t.Fatalf("upstream calls p0=%d p1=%d, want 3 and 0", len(reqs), g.ups[1].Calls())
	}
	var roles []string
	for _, m := range reqs[2].JSON["messages"].([]any) {
		roles = append(roles, fmt.Sprint(m.(map[string]any)["role"]))
	}
	if strings.Join(roles, ",") != "system,user,assistant,user" {
		t.Errorf("the continuation's upstream roles: %v", roles)
	}
}

// nodeMessages is what testdata/nodesdk/anthropic_messages.mjs prints.
type nodeMessages struct {
	Create struct {
		ID, Type, Role, Text string
		StopReason           string `json:"stop_reason"`
		InputTokens          int    `json:"input_tokens"`
		OutputTokens         int    `json:"output_tokens"`
		Cost                 *float64
	}
	Stream struct {
		Deltas, Text string
		StopReason   string `json:"stop_reason"`
		OutputTokens int    `json:"output_tokens"`
	}
	Replay struct {
		First, Again  string
		AgainReplayed *string `json:"again_replayed"`
		Requests      int
	}
	Conflict struct {
		Class    string
		Instance bool
		Status   int
		Requests int
		Body     struct {
			Type  string
			Error struct{ Type, Code string }
		}
	}
}

// TestNodeSDKMessages drives the Messages API with the official
// @anthropic-ai/sdk: a message, a stream's finalMessage(), a keyed request
// and its replay with the SDK's retries on, and a 409 ConflictError for a
// changed body with the same key, which the SDK does not retry.
func TestNodeSDKMessages(t *testing.T) {
	g := newGateway(t, setup{})
	var got nodeMessages
	runNodeSDK(t, "anthropic_messages.mjs", g.url, &got)
	c := got.Create
	if !strings.HasPrefix(c.ID, "msg_") || c.Type != "message" || c.Role != "assistant" || c.Text != "Hello world" || c.StopReason != "end_turn" ||
		c.InputTokens != 10 || c.OutputTokens != 2 || c.Cost == nil || *c.Cost != 1.4e-05 {
		t.Errorf("message: %+v (cost %v)", c, c.Cost)
	}
	if s := got.Stream; s.Deltas != "Hello world" || s.Text != "Hello world" || s.StopReason != "end_turn" || s.OutputTokens != 2 {
		t.Errorf("stream: %+v", s)
	}
	if r := got.Replay; !strings.HasPrefix(r.First, "msg_") || r.Again != r.First || r.AgainReplayed == nil || *r.AgainReplayed != "true" || r.Requests != 2 {
		t.Errorf("replay: %+v", r)
	}
	if k := got.Conflict; !k.Instance || k.Status != 409 || k.Body.Type != "error" || k.Body.Error.Code != "idempotency_conflict" || k.Requests != 1 {
		t.Errorf("a changed body with the same key: %+v", k)
	}
	// The message, the stream and the keyed request; the replay and the
	// conflict call no upstream.
	if p0, p1 := g.ups[0].Calls(), g.ups[1].Calls(); p0 != 3 || p1 != 0 {
		t.Errorf("upstream calls p0=%d p1=%d, want 3 and 0", p0, p1)
	}
}

// TestNodeSDKMessagesOnConverse: the same script on a Bedrock route to a
// model that is not Claude: the SDK's message, stream, replay and conflict
// come out as on Anthropic's API, from Converse's events translated to
// Messages events.
func TestNodeSDKMessagesOnConverse(t *testing.T) {
	url, bedrock, openai, _, _ := bedrockFirstModel(t, novaModel)
	var got nodeMessages
	runNodeSDK(t, "anthropic_messages.mjs", url, &got)
	c := got.Create
	if !strings.HasPrefix(c.ID, "msg_") || c.Type != "message" || c.Role != "assistant" || c.Text != "Hello world" || c.StopReason != "end_turn" ||
		c.InputTokens != 10 || c.OutputTokens != 2 || c.Cost == nil || *c.Cost != 1.4e-05 {
		t.Errorf("message: %+v (cost %v)", c, c.Cost)
	}
	if s := got.Stream; s.Deltas != "Hello world" || s.Text != "Hello world" || s.StopReason != "end_turn" || s.OutputTokens != 2 {
		t.Errorf("stream: %+v", s)
	}
	if r := got.Replay; r.Again != r.First || r.AgainReplayed == nil || *r.AgainReplayed != "true" {
		t.Errorf("replay: %+v", r)
	}
	if bedrock.Calls() != 3 || openai.Calls() != 0 {
		t.Errorf("calls Bedrock %d, OpenAI %d; want 3, 0", bedrock.Calls(), openai.Calls())
	}
}

// TestNodeSDKModels drives the Models API and token counting with the
// official @anthropic-ai/sdk, the key in x-api-key alone (testdata/nodesdk/
// anthropic_models.mjs says what it calls).
func TestNodeSDKModels(t *testing.T) {
	g := newClaudeGateway(t, "", "")
	type count struct {
		InputTokens int `json:"input_tokens"`
		Provider    *string
		Estimated   *string
	}
	var got struct {
		Paged []string
		Page  struct {
			IDs     []string
			HasMore bool    `json:"has_more"`
			FirstID *string `json:"first_id"`
			LastID  *string `json:"last_id"`
		}
		One struct {
			ID, Type, Lifecycle string
			DisplayName         string `json:"display_name"`
			CreatedAt           string `json:"created_at"`
		}
		Missing struct {
			Class    string
			Instance bool
			Status   int
			Body     struct {
				Type  string
				Error struct{ Type, Code string }
			}
		}
		Count, Beta, Estimate count
		Requests              []string
	}
	runNodeSDK(t, "anthropic_models.mjs", g.url, &got)
	if want := []string{"m", "vendor/b", "s"}; !cmp.Equal(got.Paged, want) || !cmp.Equal(got.Page.IDs, want) || got.Page.HasMore ||
		got.Page.FirstID == nil || *got.Page.FirstID != "m" || got.Page.LastID == nil || *got.Page.LastID != "s" {
		t.Errorf("models.list: paged %v, page %+v", got.Paged, got.Page)
	}
	if o := got.One; o.ID != "vendor/b" || o.Type != "model" || o.DisplayName != "vendor/b" || o.CreatedAt != "1970-01-01T00:00:00Z" || o.Lifecycle != "active" {
		t.Errorf("models.retrieve: %+v", o)
	}
	if m := got.Missing; !m.Instance || m.Status != 404 || m.Body.Type != "error" || m.Body.Error.Type != "not_found_error" || m.Body.Error.Code != "model_not_found" {
		t.Errorf("models.retrieve of an unknown model: %+v", m)
	}
	str := func(s *string) string {
		if s == nil {
			return "<none>"
		}
		return *s
	}
	for _, c := range []struct {
		name                string
		got                 count
		tokens              int
		provider, estimated string
	}{
		{"messages.countTokens", got.Count, 37, "claude", "<none>"},
		{"beta.messages.countTokens", got.Beta, 37, "claude", "<none>"},
		{"an estimate", got.Estimate, 5, "<none>", "true"}, // "Be brief." and "Say hello": 18 bytes
	} {
		if c.got.InputTokens != c.tokens || str(c.got.Provider) != c.provider || str(c.got.Estimated) != c.estimated {
			t.Errorf("%s: %d tokens, provider %s, estimated %s", c.name, c.got.InputTokens, str(c.got.Provider), str(c.got.Estimated))
		}
	}
	up := g.claude.CountTokensRequests()
	if len(up) != 2 || up[0].JSON["model"] != "claude-x" || up[0].Header.Get("Anthropic-Beta") != "" ||
		!strings.Contains(up[1].Header.Get("Anthropic-Beta"), "token-counting-2024-11-01") || up[1].Header.Get("X-Api-Key") != "claude-secret" {
		t.Errorf("the upstream's count_tokens calls: %d %v", len(up), up)
	}
	xKey := " authorization= x-api-key=" + testKey
	want := []string{
		"GET /api/v1/models?limit=1" + xKey, "GET /api/v1/models?limit=1&after_id=m" + xKey, "GET /api/v1/models?limit=1&after_id=vendor%2Fb" + xKey,
		"GET /api/v1/models" + xKey, "GET /api/v1/models/vendor%2Fb" + xKey, "GET /api/v1/models/nope" + xKey,
		"POST /api/v1/messages/count_tokens" + xKey, "POST /api/v1/messages/count_tokens?beta=true" + xKey,
		"POST /api/v1/messages/count_tokens authorization=Bearer " + testKey + " x-api-key=",
	}
	if diff := cmp.Diff(want, got.Requests); diff != "" {
		t.Errorf("the SDK's requests (-want +got):\n%s", diff)
	}
}
