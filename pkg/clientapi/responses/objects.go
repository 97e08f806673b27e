package responses

import (
	"encoding/json"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
)

// providerObject finds the first reference in a Responses body to an
// object stored at the provider (clientapi.ObjectRef): conversation (a
// stored conversation), prompt (a stored prompt template), an input item
// of type item_reference (a stored item), a file_id anywhere in an input
// item (an input_file or input_image uploaded with the Files API, in a
// message's content or a tool call's output), and in tools a file_search
// tool's vector_store_ids, a code_interpreter tool's container (by id, or
// with file_ids) and an image_generation tool's input_image_mask.file_id.
// previous_response_id is not one: it names a turn the gateway kept, for
// the caller's project only (turns.go).
func providerObject(body []byte) (clientapi.ObjectRef, bool) {
	if !clientapi.MayRefer(body, `"file_id"`, `"item_reference"`, `"conversation"`, `"prompt"`, `"vector_store_ids"`, `"container"`) {
		return clientapi.ObjectRef{}, false
	}
	top := clientapi.Fields(body)
	if _, ok := clientapi.Present(top, "conversation"); ok {
		return clientapi.ObjectRef{Param: "conversation", What: "a conversation"}, true
	}
	if _, ok := clientapi.Present(top, "prompt"); ok {
		return clientapi.ObjectRef{Param: "prompt", What: "a prompt"}, true
	}
	for i, raw := range clientapi.Items(top["input"]) {
		at := clientapi.At("input", i)
		item := clientapi.Fields(raw)
		if clientapi.Str(item["type"]) == "item_reference" {
			return clientapi.ObjectRef{Param: at + ".id", What: "an item"}, true
		}
		// An input item's structure is the API's own (a function call's
		// arguments are a string), so a file_id at any depth is a file:
		// in a message's parts, a function_call_output's, a
		// computer_call_output's screenshot...
		if p, ok := clientapi.Find(raw, at, "file_id"); ok {
			return clientapi.ObjectRef{Param: p, What: "a file"}, true
		}
	}
	for i, raw := range clientapi.Items(top["tools"]) {
		if ref, ok := toolObject(clientapi.Fields(raw), clientapi.At("tools", i)); ok {
			return ref, true
		}
	}
	return clientapi.ObjectRef{}, false
}

func toolObject(tool map[string]json.RawMessage, at string) (clientapi.ObjectRef, bool) {
	if _, ok := clientapi.Present(tool, "vector_store_ids"); ok {
		return clientapi.ObjectRef{Param: at + ".vector_store_ids", What: "a vector store"}, true
	}
	if raw, ok := clientapi.Present(tool, "container"); ok {
		c := clientapi.Fields(raw)
		if c == nil {
			return clientapi.ObjectRef{Param: at + ".container", What: "a container"}, true
		}
		if len(clientapi.Items(c["file_ids"])) > 0 {
			return clientapi.ObjectRef{Param: at + ".container.file_ids", What: "a file"}, true
		}
	}
	if _, ok := clientapi.Present(clientapi.Fields(tool["input_image_mask"]), "file_id"); ok {
		return clientapi.ObjectRef{Param: at + ".input_image_mask.file_id", What: "a file"}, true
	}
	return clientapi.ObjectRef{}, false
}
