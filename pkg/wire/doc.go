// Package wire groups the JSON wire shapes of the protocols the gateway
// speaks, one package each: chat (OpenAI Chat Completions), messages
// (Anthropic Messages), responses (OpenAI Responses) and converse (Amazon
// Bedrock's Converse). Each declares its stop-reason vocabulary and how it
// reads as the hub's finish_reason, its error envelope, the headers it
// forwards, and its translations to and from the hub. They sit just above
// the hub: they import the standard library, each other, the JSON library
// (go-json-experiment/json), the hub (pkg/llm) and the JSON and SSE helpers
// beneath it (pkg/sse, pkg/canonjson, internal/jsonstr, internal/jsonobj)
// and, for Converse, whose wire types are the AWS SDK's, that SDK, and
// nothing else, so that codecs, adapters, fake upstreams and tools can all
// share them (TestImports).
package wire
