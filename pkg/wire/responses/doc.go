// Package responses is OpenAI's Responses wire shape: the request with its
// input items, content parts, tools, tool_choice, text format and
// reasoning settings; the response object with its output items (message,
// function_call, reasoning), content parts, usage, error and
// incomplete_details; and every stream event (its type as
// a constant, and its struct, "type" and "sequence_number" first). Fields
// are in OpenAI's order, so that what a writer encodes reads like OpenAI's
// own bytes; a field the API leaves out when it has nothing to say is
// omitempty, and one a reader must tell absent from zero is a pointer or
// json.RawMessage. How a response ends (status and incomplete_details)
// reads as a Chat Completions finish reason, and back, is here too; the
// error envelope is Chat Completions' (package chat).
//
// The codecs, the adapters and the fake upstreams write these types and
// compare against these names. What an upstream streams is read here too
// (EventReader, ReadItem, ReadResponse): leniently, a member of the wrong
// type read as absent, so that an event of a kind or a shape this package
// does not know passes through.
//
// The translations between this protocol and the hub (pkg/llm) are here as
// well: a Chat Completions request as a Responses one (EncodeRequest), an
// upstream's Responses stream as hub chunks (Decoder), and the observer of
// a stream passed through (Observer).
//
// # The translation, Chat Completions to Responses
//
//	Chat Completions                        Responses
//	model                                   model (the route's)
//	system and developer messages           instructions, joined by a blank line, wherever they
//	                                        are (the text parts of one message are joined with
//	                                        no separator): the Responses API's own place for them
//	user messages                           message items; a string stays a string; parts: text →
//	                                        input_text, image_url {url, detail} → input_image
//	                                        {image_url, detail (auto when unset)}, input_audio →
//	                                        input_audio, file {file_id|file_data, filename} →
//	                                        input_file
//	assistant content and refusal           a message item of output_text and refusal parts
//	assistant tool_calls                    function_call items {call_id, name, arguments}
//	tool messages                           function_call_output items {call_id, output}
//	tools (type function)                   function tools {name, description, parameters,
//	                                        strict}: parameters an empty object schema when
//	                                        unset, strict false when unset (Chat's default;
//	                                        Responses' own default is true)
//	tool_choice auto/none/required          the same
//	tool_choice {function: {name}}          {type: function, name}
//	tool_choice {allowed_tools: {mode, tools}}
//	                                        {type: allowed_tools, mode, tools: [{type: function, name}]}
//	parallel_tool_calls                     parallel_tool_calls
//	response_format text/json_object        text.format {type}
//	response_format json_schema             text.format {type: json_schema, name, schema,
//	                                        description, strict}
//	verbosity                               text.verbosity
//	max_completion_tokens, else max_tokens  max_output_tokens (the upstream's minimum applies:
//	                                        16 on OpenAI)
//	reasoning_effort                        reasoning.effort
//	temperature, top_p, user, metadata,     the same, as the client wrote them
//	safety_identifier, prompt_cache_key,
//	prompt_cache_retention, service_tier
//	(always)                                store: false (the gateway keeps nothing upstream on
//	                                        a translated call), stream: true
//
// Refused without a call, as a FailRejected *llm.ProviderError naming the
// field (the router answers 400 provider_rejected): what Responses cannot
// express and that would change the answer.
//
//	n above 1                               one answer per call
//	logprobs true, top_logprobs above 0     no log probabilities in the translated chunks
//	stop (a non-empty string or list)       Responses has no stop sequences
//	frequency_penalty, presence_penalty     Responses has no penalties
//	(non-zero), logit_bias (non-empty)
//	modalities other than ["text"], audio   no audio output
//	functions, function_call (deprecated)   use tools and tool_choice
//	web_search_options                      search is a Responses tool, not offered here
//	tools of another type (custom, ...)     function tools only
//	role "function" (deprecated), another   Responses has no such input
//	role, a content part of another kind
//	malformed messages, tools, tool_choice  as the upstream's own 400 would
//	or response_format
//
// Dropped, having no Responses counterpart and no effect on what the answer
// is; the gateway names those of DroppedFields a client set in the answer's
// x-gateway-dropped header:
//
//	seed                                    best-effort determinism only, on Chat too
//	prediction                              a latency hint (predicted outputs)
//	store                                   always false upstream (above)
//	top_k                                   a sampling hint Responses has no field for (a
//	                                        Messages client's top_k)
//	stream_options                          the gateway's own: the stream always reports usage
//	a message's name                        Responses items have no name
//	any other field                         as the anthropic adapter drops what it does not know
//
// # The answer, Responses events to Chat Completions chunks
//
//	response.created                        role chunk {"role":"assistant","content":""}; the
//	                                        chunks' id, model and created are the Response's
//	response.output_text.delta              delta.content
//	response.refusal.delta                  delta.refusal
//	output_item.added function_call         delta.tool_calls [{index, id: call_id, type:
//	                                        function, function {name, arguments: ""}}]
//	response.function_call_arguments.delta  delta.tool_calls [{index, function {arguments}}]
//	reasoning summary and text deltas       delta.reasoning_content (summary parts after the
//	                                        first begin with a blank line)
//	output_item.done                        what the item holds that no delta streamed (text,
//	                                        arguments: "{}" for none, reasoning)
//	response.completed                      finish_reason tool_calls when the answer has
//	                                        function calls, else stop; then the usage chunk
//	response.incomplete                     finish_reason content_filter for that reason, else
//	                                        length; then the usage chunk
//	response.failed, error                  a FailTransient *llm.ProviderError with the
//	                                        upstream's message
//	anything else                           nothing
//
// Usage, in the Chat Completions shape the hub reads (llm.ReadUsage):
// prompt_tokens is input_tokens, completion_tokens output_tokens,
// total_tokens their sum, prompt_tokens_details.cached_tokens
// input_tokens_details.cached_tokens and completion_tokens_details.
// reasoning_tokens output_tokens_details.reasoning_tokens (each detail when
// the upstream sent it). A Response without usage gives no usage chunk, so
// the gateway estimates.
package responses
