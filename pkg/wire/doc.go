// Package wire groups the JSON wire shapes of the protocols the gateway
// speaks, one package each: chat (OpenAI Chat Completions), messages
// (Anthropic Messages), responses (OpenAI Responses) and converse (Amazon
// Bedrock's Converse: its stop reasons and stream events; the Bedrock
// adapter reads them with the AWS SDK's types). Each declares its stop-reason vocabulary and how it reads as the
// hub's finish_reason, its error envelope, and the headers it forwards.
// They sit just above the hub: they import the standard library, each
// other, the JSON library (go-json-experiment/json) and the hub (pkg/llm,
// pkg/sse, internal/jsonstr) only, so that codecs, adapters, fake
// upstreams and tools can all share them (TestImports).
package wire
