package responses_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// TestObserverCountsToolCalls: the usage an observed stream reports counts
// the built-in tool calls OpenAI bills, as OpenAI bills them: a
// web_search_call, file_search_call or image_generation_call item is one
// call; code interpreter calls count their distinct containers; an item
// named both by output_item.done and by the terminal Response counts once;
// calls of the client's own tools and of MCP servers are not counted.
func TestObserverCountsToolCalls(t *testing.T) {
	items := []string{
		`{"id":"ws_1","type":"web_search_call","status":"completed"}`,
		`{"id":"fs_1","type":"file_search_call","status":"completed","queries":["q"]}`,
		`{"id":"fs_2","type":"file_search_call","status":"completed","queries":["r"]}`,
		`{"id":"ci_1","type":"code_interpreter_call","status":"completed","container_id":"cntr_a"}`,
		`{"id":"ci_2","type":"code_interpreter_call","status":"completed","container_id":"cntr_a"}`,
		`{"id":"ig_1","type":"image_generation_call","status":"completed","result":"aGk="}`,
		`{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`,
		`{"id":"mcp_1","type":"mcp_call","name":"t","server_label":"s","arguments":"{}"}`,
		`{"id":"sh_1","type":"shell_call","call_id":"c2","action":{"commands":["ls"]}}`,
	}
	var o responses.Observer
	// The first three items stream as done events; all of them, and one
	// web search the stream did not name, are in the terminal Response.
	for _, it := range items[:3] {
		if _, err := o.Observe("response.output_item.done", []byte(`{"type":"response.output_item.done","output_index":0,"item":`+it+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	all := `[` + `{"id":"ws_2","type":"web_search_call","status":"completed"}`
	for _, it := range items {
		all += "," + it
	}
	all += "]"
	done := `{"type":"response.completed","response":{"id":"r","object":"response","status":"completed","model":"m","output":` + all +
		`,"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}}`
	if _, err := o.Observe("response.completed", []byte(done)); err != nil {
		t.Fatal(err)
	}
	u := o.UsageSoFar()
	if u == nil {
		t.Fatal("no usage")
	}
	want := map[string]int{"web_search": 2, "file_search": 2, "code_interpreter": 1, "image_generation": 1}
	if diff := cmp.Diff(want, u.ServerToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if u.PromptTokens != 10 || u.CompletionTokens != 5 {
		t.Errorf("usage %+v", u)
	}

	// A stream without built-in tool calls reports no server_tool_use.
	var plain responses.Observer
	if _, err := plain.Observe("response.completed", []byte(`{"type":"response.completed","response":{"id":"r","status":"completed","output":[],"usage":{"input_tokens":1,"output_tokens":1}}}`)); err != nil {
		t.Fatal(err)
	}
	if u := plain.UsageSoFar(); u == nil || u.Extra[llm.ServerToolUse] != nil {
		t.Errorf("usage %+v, want no %s", u, llm.ServerToolUse)
	}
}
