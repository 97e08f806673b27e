package llm

import "encoding/json"

// Translator makes a client's request in the gateway's own form (the Chat
// Completions request) from the client's body in its own protocol, with
// what else the translation made for the answer (Translation).
type Translator interface {
	Translate() (*ChatRequest, Translation, error)
}

// Translation is what a client API's translation of a request made besides
// its Chat Completions form, for encoding an answer to it: the pipeline
// does not read it, and returns it with an answer served in Chat
// Completions (router.Answer.Translation).
type Translation any

// Translation is what the request's translation made besides its Chat
// Completions form (Translator), nil when it was not translated.
func (r *ChatRequest) Translation() Translation { return r.translation }

// NewRoutingRequest returns the request of a client in another protocol,
// from its body's top-level members, until its Chat Completions form is
// needed: only what the pipeline reads of every request is decoded (the
// model and its suffix, stream, and the gateway-owned objects, with the
// errors DecodeChatRequest gives for them), which is what a plan is made
// from. size is the client's body's length. A request to be served is
// then given what makes its whole Chat Completions form the first time a
// route of another protocol needs it (TranslateWith): a request that
// passes through to a route of its own protocol is never translated, so
// what its translation costs (several times the body) is not paid.
func NewRoutingRequest(members []Member, size int) (*ChatRequest, error) {
	return newRoutingRequest(members, size, false)
}

// TranslateWith makes t the request's translator: the first time a route
// of another protocol needs the request's Chat Completions form
// (UpstreamParts), t makes it, once. A request of NewRoutingRequest is
// given one as it is made ready to be served, after its plan.
func (r *ChatRequest) TranslateWith(t Translator) { r.translator = t }

// DecodeRoutingRequest reads what routing reads of a whole body of another
// protocol than Chat Completions, for an endpoint that plans it and
// translates nothing (Messages count_tokens): NewRoutingRequest of its
// members, with its messages checked too (a non-empty array of objects
// with a role), each problem refused as DecodeChatRequest refuses it.
func DecodeRoutingRequest(body []byte) (*ChatRequest, error) {
	members, err := RequestMembers(body)
	if dup, ok := err.(*Error); ok {
		return nil, dup
	}
	if err != nil {
		// Not one object the scan reads: encoding/json names the
		// problem, or reads a body the scan leaves aside.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return nil, bodyError(body, err)
		}
		if fields == nil {
			return nil, Invalid("", "request body must be a JSON object")
		}
		members = make([]Member, 0, len(fields))
		for k, v := range fields {
			members = append(members, Member{Key: k, Value: v})
		}
	}
	return newRoutingRequest(members, len(body), true)
}

// newRoutingRequest is NewRoutingRequest, checking the messages too when
// messages is true, in DecodeChatRequest's order.
func newRoutingRequest(members []Member, size int, messages bool) (*ChatRequest, error) {
	fields := make(map[string]json.RawMessage, 4)
	for _, m := range members {
		switch m.Key {
		case "model", "stream", "gateway", "provider":
			fields[m.Key] = m.Value
		case "messages":
			if messages {
				fields[m.Key] = m.Value
			}
		}
	}
	r := &ChatRequest{size: size}
	if err := r.decodeModel(fields); err != nil {
		return nil, err
	}
	if messages {
		if err := checkMessages(fields["messages"]); err != nil {
			return nil, err
		}
	}
	var err error
	if r.Stream, err = boolField(fields, "stream", "stream"); err != nil {
		return nil, err
	}
	if err := r.decodeOptions(fields); err != nil {
		return nil, err
	}
	return r, nil
}

// translated makes the request's Chat Completions form if it is still to
// be made. A translation that fails sets ChatErr: the request is then
// served only by routes of its own protocol.
func (r *ChatRequest) translated() error {
	if r.translator == nil {
		return r.ChatErr
	}
	t := r.translator
	r.translator = nil
	full, tr, err := t.Translate()
	if err != nil {
		r.ChatErr = err
		return err
	}
	r.fields = full.fields
	r.Dropped = full.Dropped
	r.translation = tr
	return nil
}
