// Package wire groups the JSON wire shapes of the protocols the gateway
// speaks, one package each: chat (OpenAI Chat Completions), messages
// (Anthropic Messages), responses (OpenAI Responses) and converse (Amazon
// Bedrock's Converse: its stop reasons and stream events; the Bedrock
// adapter reads them with the AWS SDK's types). Each declares its stop-reason vocabulary and how it reads as the
// hub's finish_reason, its error envelope, and the headers it forwards.
// A package may also translate its protocol to and from the hub (pkg/llm),
// as messages does. They sit beneath the client APIs and the adapters:
// they import the standard library, each other, the JSON library
// (go-json-experiment/json), pkg/llm and the JSON and SSE helpers beneath
// it only, so that codecs, adapters, fake upstreams and tools can all
// share them (TestImports).
package wire
