package responses

import (
	"encoding/json"
	"testing"
)

func TestChatUsage(t *testing.T) {
	for _, tt := range []struct {
		in    string
		tools map[string]int64
		want  string
	}{
		{`{"input_tokens":10,"input_tokens_details":{"cached_tokens":3},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":15}`, nil,
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}`},
		{`{"input_tokens":1,"output_tokens":2}`, map[string]int64{"web_search_requests": 2},
			`{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"server_tool_use":{"web_search_requests":2}}`},
		{`{"input_tokens":1,"output_tokens":2}`, map[string]int64{}, `{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`},
		// A detail's key is matched exactly; a null one is not sent.
		{`{"input_tokens":1,"input_tokens_details":{"Cached_Tokens":4},"output_tokens_details":{"reasoning_tokens":null}}`, nil,
			`{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}`},
		{`{"input_tokens":1e10,"output_tokens":true}`, nil, `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`},
		{`{"total_tokens":3}`, nil, ``},
		{` null`, nil, ``},
		{`"x"`, nil, ``},
	} {
		if got := ChatUsage(json.RawMessage(tt.in), tt.tools); string(got) != tt.want {
			t.Errorf("ChatUsage(%s, %v) = %s, want %s", tt.in, tt.tools, got, tt.want)
		}
	}
}
