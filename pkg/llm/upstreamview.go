package llm

import "github.com/buzzgate/buzzgate/pkg/wire/chat"

// ChatView is the body, a Chat Completions request, as the translations
// out of Chat Completions read it: decoded the first time one asks, and
// kept, so that the body is decoded once however many read it. The error
// is encoding/json's when the body is not such a request.
func (r *UpstreamRequest) ChatView() (*chat.RequestView, error) {
	if r.view == nil && r.viewErr == nil {
		r.view, r.viewErr = chat.DecodeRequestView(r.Bytes())
	}
	return r.view, r.viewErr
}
