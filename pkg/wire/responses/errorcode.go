package responses

// CodeServerError is the code of a failed response's error, and of an
// error event, when the server failed (Error.Code, ErrorEvent.Code).
const CodeServerError = "server_error"
