package llm

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServerTools: the billable server tools a request declares, by
// protocol; tools billed as tokens only are left out, a tool the gateway
// cannot price is refused naming it.
func TestServerTools(t *testing.T) {
	for _, c := range []struct {
		name      string
		proto     Proto
		body      string
		want      []ServerTool
		wantParam string // an error's param
	}{
		{"messages web_search", ProtoMessages,
			`{"tools":[{"name":"f","input_schema":{}},{"type":"custom","name":"g"},{"type":"bash_20250124","name":"bash"},{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"web_search_20250305","name":"web_search"}]}`,
			[]ServerTool{{Name: "web_search", Count: "web_search", Param: "tools[4]"}}, ""},
		{"messages unknown server tool", ProtoMessages, `{"tools":[{"type":"maps_search_20270101","name":"maps"}]}`,
			[]ServerTool{{Name: "maps_search", Count: "maps_search", Param: "tools[0]"}}, ""},
		{"messages code_execution", ProtoMessages, `{"tools":[{"type":"web_search_20250305"},{"type":"code_execution_20250825","name":"code_execution"}]}`, nil, "tools[1]"},
		{"messages odd type", ProtoMessages, `{"tools":[{"type":"Web Search"}]}`, nil, "tools[0].type"},
		{"responses", ProtoResponses,
			`{"tools":[{"type":"function","name":"f"},{"type":"namespace","name":"n","tools":[]},{"type":"mcp","server_label":"s"},{"type":"web_search"},{"type":"web_search_preview_2025_03_11"},{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"},{"type":"shell"}]}`,
			[]ServerTool{
				{Name: "web_search", Count: "web_search", Param: "tools[3]"},
				{Name: "web_search_preview", Count: "web_search", Param: "tools[4]"},
				{Name: "file_search", Count: "file_search", Param: "tools[5]"},
				{Name: "code_interpreter", Count: "code_interpreter", Param: "tools[6]"},
				{Name: "image_generation", Count: "image_generation", Param: "tools[7]"},
			}, ""},
		{"chat web_search_options", ProtoChat, `{"web_search_options":{},"tools":[{"type":"function","function":{"name":"f"}}]}`,
			[]ServerTool{{Name: "web_search", Count: "web_search", Param: "web_search_options", PerAnswer: true}}, ""},
		{"chat web_search_options null", ProtoChat, `{"web_search_options":null}`, nil, ""},
		{"tools not a list", ProtoResponses, `{"tools":{"type":"web_search"}}`, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms, err := Members([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ServerTools(c.proto, ms)
			if c.wantParam != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Param != c.wantParam {
					t.Fatalf("ServerTools = %v, %v; want an invalid_request naming %s", got, err, c.wantParam)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for in, want := range map[string]string{
		"web_search_20250305": "web_search", "web_search_preview_2025_03_11": "web_search_preview", "web_search_2025_08_26": "web_search",
		"web_search": "web_search", "x_1234567": "x_1234567", "_20250305": "_20250305",
	} {
		if got := ServerToolType(in); got != want {
			t.Errorf("ServerToolType(%q) = %q, want %q", in, got, want)
		}
	}
}
