package chat

import (
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/internal/reqtest"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

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

// objectBodies are Chat Completions bodies with and without references to
// provider objects, for the screen's differential test.
var objectBodies = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"tell me about \"file_id\" and \"audio\""}]}`,
	`{"model":"m","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"file","file":{"file_id":"file-abc"}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":null}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","audio":{"id":"audio_abc"}}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file\u005fid":"file-abc"}}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","\u0061udio":{"id":"audio_abc"}}]}`,
	`{"mod\u0065l":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","audio":{"id":"x"}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"a","file_id":"f"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"file_id":{"type":"string"}}}}}]}`,
}

// TestObjectScreen: the decoder's note that a body has no member named as
// one of llm.ObjectKeys (ChatRequest.MayNameObject false) is only ever
// given to a body in which providerObject finds no reference, keyed or not
// (the gateway then skips the search).
func TestObjectScreen(t *testing.T) {
	screened := 0
	for _, body := range append(stringsAsBytes(objectBodies), reqtest.AgentBodies(t, "")...) {
		screened += checkObjectScreen(t, body)
	}
	if screened < 3 {
		t.Errorf("only %d bodies screened out; the test checks too little", screened)
	}
	// Names seen on the second goroutine of a large body count too.
	pad := `{"role":"user","content":"` + strings.Repeat("x", 1000) + `"}`
	big := func(last string) []byte {
		return []byte(`{"model":"m","messages":[` + strings.Repeat(pad+",", 600) + last + `]}`)
	}
	for _, tc := range []struct {
		last string
		may  bool
	}{
		{pad, false},
		{`{"role":"assistant","audio":{"id":"a"}}`, true},
		{`{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}`, true},
	} {
		req, err := llm.DecodeChatRequest(big(tc.last))
		if err != nil || req.MayNameObject() != tc.may {
			t.Errorf("a large body ending %s: MayNameObject %v, %v; want %v", tc.last, req != nil && req.MayNameObject(), err, tc.may)
		}
	}
}

// FuzzObjectScreen is TestObjectScreen on any body.
func FuzzObjectScreen(f *testing.F) {
	for _, b := range objectBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkObjectScreen(t, body) })
}

// checkObjectScreen fails t when a decoder says body names no object and
// providerObject finds one; it returns how many of the two decoders said so.
func checkObjectScreen(t *testing.T, body []byte) (screened int) {
	t.Helper()
	ref, found := providerObject(body)
	for _, decode := range []func([]byte) (*llm.ChatRequest, error){llm.DecodeChatRequest, llm.DecodeCheckedChatRequest} {
		req, err := decode(body)
		if err != nil || req.MayNameObject() {
			continue
		}
		screened++
		if found {
			t.Fatalf("%s: screened out, but it refers to %s", body, ref.Param)
		}
	}
	return screened
}

func stringsAsBytes(ss []string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}
