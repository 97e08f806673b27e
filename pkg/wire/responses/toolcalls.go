package responses

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/buzzgate/buzzgate/internal/jsonobj"
)

// toolCalls counts the calls of the provider's built-in tools in an
// answer's output items, as OpenAI bills them: a web_search_call,
// file_search_call or image_generation_call item (and the <type>_call
// item of a built-in tool added later) is one call of its tool; the
// code interpreter is billed by the container, so its calls count the
// distinct containers they ran in. Calls of the client's own tools
// (function, custom, shell, apply_patch, computer) and of MCP servers cost
// their tokens only and are not counted. An item is counted once, by its
// id, whether an output_item.done event or the terminal Response names
// it. The zero toolCalls is ready.
type toolCalls struct {
	seen       map[string]bool
	containers map[string]bool
	counts     map[string]int64
}

// freeCalls are the *_call item types that are not billed by the call.
var freeCalls = []string{ItemFunctionCall, ItemCustomToolCall, ItemLocalShellCall, ItemShellCall,
	ItemApplyPatchCall, ItemComputerCall, ItemMCPCall}

// isCall reports whether an item of type typ may be a billed tool call,
// so that the other items (messages, reasoning) are not read twice.
func isCall(typ string) bool { return strings.HasSuffix(typ, "_call") }

// item counts one output item (raw JSON; anything unreadable is skipped).
func (t *toolCalls) item(raw json.RawMessage) {
	var it struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		ContainerID string `json:"container_id"`
	}
	if json.Unmarshal(raw, &it) != nil {
		return
	}
	tool, ok := strings.CutSuffix(it.Type, "_call")
	if !ok || tool == "" || slices.Contains(freeCalls, it.Type) {
		return
	}
	if it.ID != "" {
		if t.seen[it.ID] {
			return
		}
		if t.seen == nil {
			t.seen = map[string]bool{}
		}
		t.seen[it.ID] = true
	}
	if it.Type == ItemCodeInterpreterCall && it.ContainerID != "" {
		if t.containers[it.ContainerID] {
			return
		}
		if t.containers == nil {
			t.containers = map[string]bool{}
		}
		t.containers[it.ContainerID] = true
	}
	if t.counts == nil {
		t.counts = map[string]int64{}
	}
	t.counts[tool+"_requests"]++
}

// response counts the output items of a Response object (raw JSON).
func (t *toolCalls) response(raw json.RawMessage) {
	if jsonobj.IsNull(raw) {
		return
	}
	r, err := ReadResponse(raw, true)
	if err != nil {
		return
	}
	for _, it := range r.Output {
		t.item(it)
	}
}
