package llm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ServerTool is a tool a request declares that the provider runs itself
// and bills by the call (or by the container, or the image), on top of the
// tokens: Anthropic's web search, OpenAI's web search, file search, code
// interpreter and image generation. A route carrying such a request must
// price it (catalog.Route.ToolPrices).
type ServerTool struct {
	// Name is the tool's name in a route's tool_prices: its type less the
	// version date (web_search_20250305 is web_search).
	Name string
	// Count is the name its calls are counted under in usage
	// (server_tool_use.<Count>_requests): Responses' web_search_preview
	// is counted as web_search, as its calls are web_search_call items.
	Count string
	// Param is where the request declares it: tools[2], web_search_options.
	Param string
	// PerAnswer: the answer does not count its calls, and the provider
	// bills one per answer (Chat Completions' search models, which search
	// before every answer).
	PerAnswer bool
}

// freeServerTools are the tool types of each protocol that cost nothing
// beyond their tokens: tools the client runs (custom and function tools,
// Anthropic's bash, text_editor, computer and memory, OpenAI's shell,
// local_shell, apply_patch and computer use, whose tokens are the
// model's), and provider-side tools billed as tokens only (Anthropic's
// web_fetch, tool search and MCP connector, OpenAI's mcp).
var freeServerTools = map[Proto][]string{
	ProtoMessages:  {"custom", "bash", "text_editor", "computer", "memory", "web_fetch", "tool_search_tool_regex", "tool_search_tool_bm25", "mcp_toolset"},
	ProtoResponses: {"function", "custom", "namespace", "mcp", "local_shell", "shell", "apply_patch", "computer_use_preview", "computer_use"},
}

// unservedServerTools are server tools the gateway cannot price from an
// answer, refused whatever the route's prices, with the reason.
var unservedServerTools = map[Proto]map[string]string{
	ProtoMessages: {"code_execution": "Anthropic bills code execution by the container-hour, which no answer reports"},
}

// ServerTools lists the billable server tools a request declares, from its
// body's top-level members in protocol proto: the tools[] entries whose
// type is not one the provider runs for the price of its tokens alone (a
// type the gateway does not know counts as billable, under its own name),
// and Chat Completions' web_search_options. A server tool the gateway
// cannot price at all is a CodeInvalidRequest error naming it. What does
// not parse is left to the request's own validation.
func ServerTools(proto Proto, members []Member) ([]ServerTool, error) {
	var out []ServerTool
	for _, m := range members {
		switch {
		case proto == ProtoChat && m.Key == "web_search_options":
			if string(m.Value) != "null" {
				out = append(out, ServerTool{Name: "web_search", Count: "web_search", Param: m.Key, PerAnswer: true})
			}
		case proto != ProtoChat && m.Key == "tools":
			var tools []struct {
				Type *string `json:"type"`
			}
			if json.Unmarshal(m.Value, &tools) != nil {
				continue
			}
			for i, t := range tools {
				if t.Type == nil {
					continue // a custom tool (Messages' default)
				}
				name := ServerToolType(*t.Type)
				if containsString(freeServerTools[proto], name) {
					continue
				}
				param := fmt.Sprintf("tools[%d]", i)
				if why, ok := unservedServerTools[proto][name]; ok {
					return nil, Errorf(CodeInvalidRequest, param, "%s declares the server tool %s, which this gateway does not serve: %s", param, name, why)
				}
				count := name
				if name == "web_search_preview" {
					count = "web_search"
				}
				if !validToolName(name) {
					return nil, Errorf(CodeInvalidRequest, param+".type", "%s.type is not a tool type", param)
				}
				out = append(out, ServerTool{Name: name, Count: count, Param: param})
			}
		}
	}
	return out, nil
}

// ServerToolType is a server tool's type less a trailing version date,
// _YYYYMMDD (Anthropic's web_search_20250305) or _YYYY_MM_DD (OpenAI's
// web_search_preview_2025_03_11): the name a route's tool_prices uses.
func ServerToolType(s string) string {
	digits := func(t string) bool {
		return t != "" && strings.Trim(t, "0123456789") == ""
	}
	if i := len(s) - 9; i > 0 && s[i] == '_' && digits(s[i+1:]) {
		return s[:i]
	}
	if i := len(s) - 11; i > 0 && s[i] == '_' && digits(s[i+1:i+5]) && s[i+5] == '_' && digits(s[i+6:i+8]) && s[i+8] == '_' && digits(s[i+9:]) {
		return s[:i]
	}
	return s
}

// validToolName: a name that could be a key of tool_prices (which is
// checked the same way at start-up), so that an error may quote it.
func validToolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z') && !(i > 0 && (r >= '0' && r <= '9' || r == '_')) {
			return false
		}
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
