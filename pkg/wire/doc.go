// Package wire groups the JSON wire shapes of the protocols the gateway
// speaks, one package each: chat (OpenAI Chat Completions), messages
// (Anthropic Messages) and responses (OpenAI Responses). They are leaves:
// they import the standard library and each other only, so that codecs,
// adapters, fake upstreams and tools can all share them (TestImports).
package wire
