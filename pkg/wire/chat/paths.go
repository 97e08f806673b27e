package chat

// PathCompletions is the API's path, under its root: where a request
// creates a chat completion.
const PathCompletions = "/v1/chat/completions"
