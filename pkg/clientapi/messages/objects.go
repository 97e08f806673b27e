package messages

import (
	"encoding/json"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
)

// providerObject finds the first reference in a Messages body to an object
// stored at the provider (clientapi.ObjectRef): container (a code
// execution container, by id, or a custom skill of the organization), and
// in system and in each message's content blocks (tool results' content
// included) a source's file_id (a document or image uploaded with the
// Files API) or a block's own file_id (container_upload).
func providerObject(body []byte) (clientapi.ObjectRef, bool) {
	if !clientapi.MayRefer(body, `"file_id"`, `"container"`) {
		return clientapi.ObjectRef{}, false
	}
	top := clientapi.Fields(body)
	if ref, ok := container(top); ok {
		return ref, true
	}
	if ref, ok := blocks(top["system"], "system"); ok {
		return ref, true
	}
	for i, raw := range clientapi.Items(top["messages"]) {
		if ref, ok := blocks(clientapi.Fields(raw)["content"], clientapi.At("messages", i)+".content"); ok {
			return ref, true
		}
	}
	return clientapi.ObjectRef{}, false
}

// container: a container named by id (as a string, or as the id of an
// object) is the account's; so is a skill other than Anthropic's own.
func container(top map[string]json.RawMessage) (clientapi.ObjectRef, bool) {
	raw, ok := clientapi.Present(top, "container")
	if !ok {
		return clientapi.ObjectRef{}, false
	}
	c := clientapi.Fields(raw)
	if c == nil {
		return clientapi.ObjectRef{Param: "container", What: "a container"}, true
	}
	if _, ok := clientapi.Present(c, "id"); ok {
		return clientapi.ObjectRef{Param: "container.id", What: "a container"}, true
	}
	for k, s := range clientapi.Items(c["skills"]) {
		if clientapi.Str(clientapi.Fields(s)["type"]) != "anthropic" {
			return clientapi.ObjectRef{Param: clientapi.At("container.skills", k), What: "a custom skill"}, true
		}
	}
	return clientapi.ObjectRef{}, false
}

// blocks looks through the content blocks at path, and one level down into
// a block's own content (a tool_result's).
func blocks(raw json.RawMessage, path string) (clientapi.ObjectRef, bool) {
	for j, b := range clientapi.Items(raw) {
		at := clientapi.At(path, j)
		block := clientapi.Fields(b)
		if ref, ok := fileOf(block, at); ok {
			return ref, true
		}
		for k, inner := range clientapi.Items(block["content"]) {
			if ref, ok := fileOf(clientapi.Fields(inner), clientapi.At(at+".content", k)); ok {
				return ref, true
			}
		}
	}
	return clientapi.ObjectRef{}, false
}

func fileOf(block map[string]json.RawMessage, at string) (clientapi.ObjectRef, bool) {
	if _, ok := clientapi.Present(clientapi.Fields(block["source"]), "file_id"); ok {
		return clientapi.ObjectRef{Param: at + ".source.file_id", What: "a file"}, true
	}
	if _, ok := clientapi.Present(block, "file_id"); ok {
		return clientapi.ObjectRef{Param: at + ".file_id", What: "a file"}, true
	}
	return clientapi.ObjectRef{}, false
}
