package messages

// The API's paths, under its root: a message, and the count of a
// request's input tokens.
const (
	PathMessages    = "/v1/messages"
	PathCountTokens = "/v1/messages/count_tokens"
)
