package llm

import "context"

// TokenCounter is a provider's upstream that counts the input tokens of an
// Anthropic Messages request itself (Anthropic's POST
// /v1/messages/count_tokens): a provider that has one says so in its Caps,
// and the HTTP layer answers with the Messages package's estimate
// (wire/messages.EstimateInputTokens) when no candidate of a plan has one.
// Counting is not a generation: the router's fallback,
// health and billing play no part.
type TokenCounter interface {
	// CountTokens sends req in one call and returns the upstream's answer,
	// or a *ProviderError classified as for ChatStream when the upstream
	// fails (its 400 is FailRejected, with the message of its error
	// envelope; a 200 whose body has no input_tokens is FailTransient), or
	// the context's error when ctx ended.
	CountTokens(ctx context.Context, req *TokenCountRequest) (*TokenCount, error)
}

// TokenCountRequest is one count_tokens call.
type TokenCountRequest struct {
	// Model is the route's upstream model name; it replaces the body's
	// "model".
	Model string
	// Body is the client's count_tokens body, a JSON object, less the
	// fields the gateway owns ("gateway", "provider").
	Body []byte
	// Version is the client's anthropic-version header; empty means the
	// adapter's own.
	Version string
	// Beta holds the client's anthropic-beta header values, as sent.
	Beta []string
}

// TokenCount is an upstream's count_tokens answer.
type TokenCount struct {
	// InputTokens is the answer's input_tokens.
	InputTokens int
	// Body is the answer as the upstream sent it, byte for byte.
	Body []byte
}
