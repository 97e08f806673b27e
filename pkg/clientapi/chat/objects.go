package chat

import (
	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// providerObject finds the first reference in a Chat Completions body to
// an object stored at the provider (clientapi.ObjectRef): a file content
// part's file.file_id (an uploaded file), an assistant message's audio.id
// (an earlier audio answer the provider keeps).
func providerObject(body []byte) (clientapi.ObjectRef, bool) {
	if !clientapi.MayRefer(body, objectWords...) {
		return clientapi.ObjectRef{}, false
	}
	top := clientapi.Fields(body)
	for i, raw := range clientapi.Items(top["messages"]) {
		at := clientapi.At("messages", i)
		msg := clientapi.Fields(raw)
		if _, ok := clientapi.Present(clientapi.Fields(msg["audio"]), "id"); ok {
			return clientapi.ObjectRef{Param: at + ".audio.id", What: "an audio answer"}, true
		}
		for j, part := range clientapi.Items(msg["content"]) {
			if _, ok := clientapi.Present(clientapi.Fields(clientapi.Fields(part)["file"]), "file_id"); ok {
				return clientapi.ObjectRef{Param: clientapi.At(at+".content", j) + ".file.file_id", What: "a file"}, true
			}
		}
	}
	return clientapi.ObjectRef{}, false
}

// objectWords are llm.ObjectKeys as JSON strings, for clientapi.MayRefer.
var objectWords = func() []string {
	w := make([]string, len(llm.ObjectKeys))
	for i, k := range llm.ObjectKeys {
		w[i] = `"` + k + `"`
	}
	return w
}()
