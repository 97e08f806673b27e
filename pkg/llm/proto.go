package llm

import "net/http"

// Proto is a wire protocol: the one a client API speaks, and the one an
// upstream speaks. A request whose client API and route share a protocol
// goes upstream as the client wrote it; any other pair goes through Chat
// Completions, the pipeline's own shape (docs/architecture.md#protocols).
type Proto uint8

const (
	// ProtoChat is OpenAI Chat Completions.
	ProtoChat Proto = iota
	// ProtoMessages is Anthropic Messages.
	ProtoMessages
	// ProtoResponses is OpenAI Responses.
	ProtoResponses
)

// String is the protocol's name in logs, metrics and docs.
func (p Proto) String() string {
	switch p {
	case ProtoChat:
		return "chat"
	case ProtoMessages:
		return "messages"
	case ProtoResponses:
		return "responses"
	}
	return "unknown"
}

// Native is a client's request in its own protocol, kept beside the Chat
// Completions form the pipeline reads, for routes that speak it.
type Native struct {
	Proto Proto
	// Header holds the protocol's own request headers to forward
	// (anthropic-version, anthropic-beta), canonical names.
	Header http.Header

	// members are the client's body split (Members), size its length.
	members []Member
	size    int
}

// NewNative keeps a client's body, already split into its top-level
// members (which share its memory), in protocol proto.
func NewNative(proto Proto, members []Member, size int, header http.Header) *Native {
	return &Native{Proto: proto, Header: header, members: members, size: size}
}

// BodyFor is the upstream body for a route serving model: the client's body
// with "model" set to it, "stream" true and the gateway-owned fields
// (GatewayFields) left out, as pieces (SpliceParts): the client's large
// values are sent from where they are, never copied.
func (n *Native) BodyFor(model string) ([][]byte, error) {
	set := map[string][]byte{"model": AppendString(nil, model), "stream": []byte("true")}
	for _, k := range GatewayFields {
		set[k] = nil
	}
	return SpliceParts(n.members, set), nil
}
