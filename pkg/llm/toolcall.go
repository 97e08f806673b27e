package llm

// ToolCall is a tool call in a Chat Completions assistant message, the form
// the gateway's canonical request carries a call in and the client APIs'
// translations read and write.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function a tool call names and its arguments, a JSON
// text as the model wrote it (possibly cut short).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
