package responses

import (
	"fmt"
	"strings"
	"testing"
)

func TestProviderObject(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{"model":"m","input":"a conversation about a prompt, a container and file_id"}`, ""},
		{`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, ""},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation"},
		{`{"model":"m","input":"hi","conversation":{"id":"conv_1"}}`, "conversation"},
		{`{"model":"m","prompt":{"id":"pmpt_1"}}`, "prompt"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].id"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_file","file_id":"file-1"}]}]}`, "input[0].content[1].file_id"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`, "input[0].content[0].file_id"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`, ""},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_id":"file-1"}]}]}`, "input[0].output[0].file_id"},
		{`{"model":"m","input":[{"type":"computer_call_output","call_id":"c","output":{"type":"computer_screenshot","file_id":"file-1"}}]}`, "input[0].output.file_id"},
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{\"file_id\":\"mine\"}"}]}`, ""},
		{`{"model":"m","input":"x","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "tools[0].vector_store_ids"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"code_interpreter","container":"cntr_1"}]}`, "tools[1].container"},
		{`{"model":"m","input":"x","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, ""},
		{`{"model":"m","input":"x","tools":[{"type":"code_interpreter","container":{"type":"auto","file_ids":["file-1"]}}]}`, "tools[0].container.file_ids"},
		{`{"model":"m","input":"x","tools":[{"type":"image_generation","input_image_mask":{"file_id":"file-1"}}]}`, "tools[0].input_image_mask.file_id"},
	} {
		ref, ok := providerObject([]byte(tc.body))
		if ok != (tc.param != "") || ref.Param != tc.param {
			t.Errorf("%s: got %q (%v), want %q", tc.body, ref.Param, ok, tc.param)
		}
	}
}

// BenchmarkProviderObject: the screen on a coding agent's turn of 1 MiB
// that refers to nothing (Codex sends prompt_cache_key, reasoning and
// function calls), which is every such request's cost.
func BenchmarkProviderObject(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"model":"m","prompt_cache_key":"k","reasoning":{"effort":"high"},"store":false,"input":[`)
	for i := 0; body.Len() < 1<<20; i++ {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"type":"message","role":"user","content":[{"type":"input_text","text":"read the prompt of container %d: caf\u00e9"}]},{"type":"function_call","call_id":"c%d","name":"shell","arguments":"{\"cmd\":\"ls\"}"}`, i, i)
	}
	body.WriteString(`]}`)
	raw := []byte(body.String())
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, ok := providerObject(raw); ok {
			b.Fatal("found a reference")
		}
	}
}
