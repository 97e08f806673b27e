package messages

import "testing"

func TestProviderObject(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a container of file_id"}]}`, ""},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AA=="}}]}]}`, ""},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"document","source":{"type":"file","file_id":"file_01"}}]}]}`, "messages[0].content[1].source.file_id"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_01"}}]}]}`, "messages[0].content[0].source.file_id"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"file_01"}]}]}`, "messages[0].content[0].file_id"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"file","file_id":"file_01"}}]}]}]}`, "messages[2].content[0].content[0].source.file_id"},
		{`{"model":"m","max_tokens":5,"container":"container_011","messages":[{"role":"user","content":"a"}]}`, "container"},
		{`{"model":"m","max_tokens":5,"container":{"id":"container_011"},"messages":[{"role":"user","content":"a"}]}`, "container.id"},
		{`{"model":"m","max_tokens":5,"container":{"skills":[{"type":"anthropic","skill_id":"pptx"}]},"messages":[{"role":"user","content":"a"}]}`, ""},
		{`{"model":"m","max_tokens":5,"container":{"skills":[{"type":"anthropic","skill_id":"pptx"},{"type":"custom","skill_id":"skill_01"}]},"messages":[{"role":"user","content":"a"}]}`, "container.skills[1]"},
	} {
		ref, ok := providerObject([]byte(tc.body))
		if ok != (tc.param != "") || ref.Param != tc.param {
			t.Errorf("%s: got %q (%v), want %q", tc.body, ref.Param, ok, tc.param)
		}
	}
}
