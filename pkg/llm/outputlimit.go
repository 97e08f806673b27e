package llm

// OutputDefaulter is a Provider that sets an output limit of its own on a
// request that sets none (Anthropic's Messages requires max_tokens: its
// adapter sends one). It is optional: the router finds it with a type
// assertion, for what a request without a limit may produce (reserved
// against a tpm).
type OutputDefaulter interface {
	// DefaultMaxOutputTokens is the most output tokens the provider lets
	// a request that sets no limit produce (for each choice).
	DefaultMaxOutputTokens() int
}
