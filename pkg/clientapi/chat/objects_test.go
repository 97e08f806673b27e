package chat

import "testing"

func TestProviderObject(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ""},
		{`{"model":"m","messages":[{"role":"user","content":"tell me about file_id and audio"}]}`, ""},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content[1].file.file_id"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,AA==","filename":"a.pdf"}}]}]}`, ""},
		{`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","audio":{"id":"audio_abc"}}]}`, "messages[1].audio.id"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file\u005fid":"file-abc"}}]}]}`, "messages[0].content[0].file.file_id"},
	} {
		ref, ok := providerObject([]byte(tc.body))
		if ok != (tc.param != "") || ref.Param != tc.param {
			t.Errorf("%s: got %q (%v), want %q", tc.body, ref.Param, ok, tc.param)
		}
	}
}
