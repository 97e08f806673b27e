package llm

// NewRoutingRequest returns a request that stands for a client's request in
// another protocol until its Chat Completions form is needed: routing reads
// its model, stream and gateway-owned objects (from routing, decoded from
// only those fields), and translate makes the whole Chat Completions form
// the first time a route of another protocol needs it (UpstreamBody).
// size is the client's body's length. A request that passes through to a
// route of its own protocol is never translated, so what its translation
// costs (several times the body) is not paid.
func NewRoutingRequest(routing *ChatRequest, size int, translate func() (*ChatRequest, error)) *ChatRequest {
	r := *routing
	r.size = size
	r.translate = translate
	return &r
}

// translated makes the request's Chat Completions form if it is still to
// be made. A translation that fails sets ChatErr: the request is then
// served only by routes of its own protocol.
func (r *ChatRequest) translated() error {
	if r.translate == nil {
		return r.ChatErr
	}
	t := r.translate
	r.translate = nil
	full, err := t()
	if err != nil {
		r.ChatErr = err
		return err
	}
	r.fields = full.fields
	r.Dropped = full.Dropped
	return nil
}
