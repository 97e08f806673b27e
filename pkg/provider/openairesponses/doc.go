// Package openairesponses is the provider adapter for upstreams that speak
// the OpenAI Responses API (api: openai-responses): POST {base_url}/responses,
// base_url up to /v1, with the key as Authorization: Bearer. Its native
// protocol is llm.ProtoResponses (llm.Caps), and it serves a call in one of
// two ways, chosen by the request's protocol:
//
//   - Passed through (llm.ProtoResponses: a Responses client on a Responses
//     route). The body goes out as the gateway hands it over, byte for byte,
//     and every event of the answer comes back as one llm.Chunk with Proto
//     llm.ProtoResponses, its SSE event name as Event (the data's "type" when
//     the upstream named none) and its data, as received, as Raw. The
//     responses.Observer reads what the router needs off each event: whether
//     it carries output, the length of its text, the finish and the usage.
//   - Translated (llm.ProtoChat: a client of Chat Completions, Messages or
//     Responses-through-Chat routed here). The Chat Completions body is
//     turned into a Responses request (responses.EncodeRequest, whose
//     package doc has the table), and the Responses events back into
//     chat.completion.chunk values (responses.Decoder), so that the rest of
//     the gateway sees the upstream as any other.
//
// Either way the upstream is called streaming. One call is one attempt (no
// retries of its own: retrying is the router's job alone), every failure is
// classified once as an *llm.ProviderError with the classes of the other
// adapters (429 throttled with its retry hint, 400 rejected with the
// upstream's message, any other status, a broken connection, an "error" event,
// response.failed or a malformed event transient), and a failure caused by
// the caller's own context is returned as the context's error instead. An
// upstream that ignores "stream": true and answers one Response object is
// read as the events that object would have streamed
// (responses.ResponseEvents). The Responses stream has no end marker of its
// own: it ends at its terminal event (response.completed or
// response.incomplete), after which Next returns io.EOF; a body that ends
// before one is llm.ErrStreamCut. It logs nothing.
package openairesponses
