package responses

// PathResponses is the API's path, under its root: where a request creates
// a response.
const PathResponses = "/v1/responses"
