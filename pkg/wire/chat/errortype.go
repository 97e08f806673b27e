package chat

// The error types of the error envelope (ErrorBody.Type) that OpenAI's API
// and the servers compatible with it write.
const (
	ErrorInvalidRequest = "invalid_request_error"
	ErrorAuthentication = "authentication_error"
	ErrorPermission     = "permission_error"
	ErrorNotFound       = "not_found_error"
	ErrorRateLimit      = "rate_limit_error"
	ErrorServer         = "server_error"
)
