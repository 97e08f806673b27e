package responses

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// The input item types a request adds to the output item types: a
// function call's result, and a reference to a stored item.
const (
	ItemFunctionCallOutput = "function_call_output"
	ItemReference          = "item_reference"
)

// The input content part types.
const (
	PartInputText  = "input_text"
	PartInputImage = "input_image"
	PartInputFile  = "input_file"
	PartInputAudio = "input_audio"
)

// The tool types a request names in tools and tool_choice: a function, a
// namespace of functions, and tool_choice's set of allowed tools.
const (
	ToolFunction     = "function"
	ToolNamespace    = "namespace"
	ToolAllowedTools = "allowed_tools"
)

// The text.format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// Request is a request's body, in the order OpenAI documents its fields.
// The members a writer passes on from its own client (numbers, settings
// it does not read) are raw, so that their text goes on unchanged, and
// left out when nil; store and stream are always written.
type Request struct {
	Model        string `json:"model"`
	Instructions string `json:"instructions,omitempty"`
	// Input holds *InputMessage, *FunctionCall and *FunctionCallOutput
	// (or the values).
	Input []any          `json:"input"`
	Tools []FunctionTool `json:"tools,omitempty"`
	// ToolChoice is "auto", "none" or "required", a *NamedTool or an
	// *AllowedTools.
	ToolChoice           any             `json:"tool_choice,omitempty"`
	ParallelToolCalls    json.RawMessage `json:"parallel_tool_calls,omitempty"`
	Text                 *Text           `json:"text,omitempty"`
	Reasoning            *Reasoning      `json:"reasoning,omitempty"`
	MaxOutputTokens      json.RawMessage `json:"max_output_tokens,omitempty"`
	Temperature          json.RawMessage `json:"temperature,omitempty"`
	TopP                 json.RawMessage `json:"top_p,omitempty"`
	User                 json.RawMessage `json:"user,omitempty"`
	SafetyIdentifier     json.RawMessage `json:"safety_identifier,omitempty"`
	PromptCacheKey       json.RawMessage `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention json.RawMessage `json:"prompt_cache_retention,omitempty"`
	ServiceTier          json.RawMessage `json:"service_tier,omitempty"`
	Metadata             json.RawMessage `json:"metadata,omitempty"`
	Store                bool            `json:"store"`
	Stream               bool            `json:"stream"`
}

// InputMessage is a message input item; Content is a string or a list of
// *InputPart (or the values).
type InputMessage struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// InputPart is one content part of a message input item: input_text,
// input_image, input_file, input_audio, or an assistant's output_text or
// refusal. Only the members of its type are set; the others are left out.
type InputPart struct {
	Type       string          `json:"type"`
	Text       *string         `json:"text,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	ImageURL   string          `json:"image_url,omitempty"`
	Detail     string          `json:"detail,omitempty"`
	FileID     json.RawMessage `json:"file_id,omitempty"`
	FileData   json.RawMessage `json:"file_data,omitempty"`
	Filename   json.RawMessage `json:"filename,omitempty"`
	InputAudio json.RawMessage `json:"input_audio,omitempty"`
}

// FunctionCall is a function_call input item: an earlier answer's call,
// sent back without the id and status of its output item.
type FunctionCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// FunctionCallOutput is a function_call_output input item: a call's
// result, as text.
type FunctionCallOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// FunctionTool is a function tool, in a request's tools and a response's.
// Parameters and strict are raw, a schema and a boolean as the client
// wrote them, and left out when nil.
type FunctionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// NamedTool names one tool: a tool_choice that forces it, or one of
// allowed_tools.
type NamedTool struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// AllowedTools is a tool_choice that restricts the model to some tools.
type AllowedTools struct {
	Type  string      `json:"type"`
	Mode  string      `json:"mode"`
	Tools []NamedTool `json:"tools"`
}

// Text is a request's text settings: the format of the answer and its
// verbosity.
type Text struct {
	Format    *TextFormat     `json:"format,omitempty"`
	Verbosity json.RawMessage `json:"verbosity,omitempty"`
}

// TextFormat is text.format: text and json_object have a type only;
// json_schema names its schema, which (with its description and strict)
// is raw.
type TextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description json.RawMessage `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// The views below are a request as a gateway reads it to check it: every
// member raw, as the client wrote it (nil when absent, null when null),
// so that the reader checks each in its own order and names it in its own
// words; members the API has but a view does not model are kept in Extra
// (an object, in body order), for the reader to refuse by name. Decode
// them with go-json-experiment/json, duplicate names and invalid UTF-8
// allowed: of a name given twice, the last value counts.

// RequestView is a request's body.
type RequestView struct {
	Model                jsontext.Value `json:"model"`
	Input                jsontext.Value `json:"input"`
	Instructions         jsontext.Value `json:"instructions"`
	MaxOutputTokens      jsontext.Value `json:"max_output_tokens"`
	Temperature          jsontext.Value `json:"temperature"`
	TopP                 jsontext.Value `json:"top_p"`
	Tools                jsontext.Value `json:"tools"`
	ToolChoice           jsontext.Value `json:"tool_choice"`
	ParallelToolCalls    jsontext.Value `json:"parallel_tool_calls"`
	Text                 jsontext.Value `json:"text"`
	Metadata             jsontext.Value `json:"metadata"`
	User                 jsontext.Value `json:"user"`
	SafetyIdentifier     jsontext.Value `json:"safety_identifier"`
	Stream               jsontext.Value `json:"stream"`
	Store                jsontext.Value `json:"store"`
	PreviousResponseID   jsontext.Value `json:"previous_response_id"`
	Background           jsontext.Value `json:"background"`
	TopLogprobs          jsontext.Value `json:"top_logprobs"`
	Conversation         jsontext.Value `json:"conversation"`
	Prompt               jsontext.Value `json:"prompt"`
	Reasoning            jsontext.Value `json:"reasoning"`
	Truncation           jsontext.Value `json:"truncation"`
	Include              jsontext.Value `json:"include"`
	ServiceTier          jsontext.Value `json:"service_tier"`
	PromptCacheKey       jsontext.Value `json:"prompt_cache_key"`
	PromptCacheRetention jsontext.Value `json:"prompt_cache_retention"`
	MaxToolCalls         jsontext.Value `json:"max_tool_calls"`
	StreamOptions        jsontext.Value `json:"stream_options"`
	ClientMetadata       jsontext.Value `json:"client_metadata"`
	Extra                jsontext.Value `json:",embed"`
}

// InputItemView is an input item of any type: a message (type, role,
// content, id, status, phase), a function_call (type, id, call_id, name,
// arguments, status), a function_call_output (type, id, call_id, output,
// status) or a reasoning item (type, id, summary, content,
// encrypted_content, status).
type InputItemView struct {
	Type             jsontext.Value `json:"type"`
	ID               jsontext.Value `json:"id"`
	Role             jsontext.Value `json:"role"`
	Content          jsontext.Value `json:"content"`
	Status           jsontext.Value `json:"status"`
	Phase            jsontext.Value `json:"phase"`
	CallID           jsontext.Value `json:"call_id"`
	Name             jsontext.Value `json:"name"`
	Arguments        jsontext.Value `json:"arguments"`
	Output           jsontext.Value `json:"output"`
	Summary          jsontext.Value `json:"summary"`
	EncryptedContent jsontext.Value `json:"encrypted_content"`
	Extra            jsontext.Value `json:",embed"`
}

// InputPartView is a content part of any type: input_text (type, text),
// input_image (type, image_url, file_id, detail), output_text (type,
// text, annotations, logprobs) or refusal (type, refusal).
type InputPartView struct {
	Type        jsontext.Value `json:"type"`
	Text        jsontext.Value `json:"text"`
	Refusal     jsontext.Value `json:"refusal"`
	ImageURL    jsontext.Value `json:"image_url"`
	FileID      jsontext.Value `json:"file_id"`
	Detail      jsontext.Value `json:"detail"`
	Annotations jsontext.Value `json:"annotations"`
	Logprobs    jsontext.Value `json:"logprobs"`
	Extra       jsontext.Value `json:",embed"`
}

// ToolView is a tool of any type: a function (type, name, description,
// parameters, strict) or a namespace (type, name, description, tools).
type ToolView struct {
	Type        jsontext.Value `json:"type"`
	Name        jsontext.Value `json:"name"`
	Description jsontext.Value `json:"description"`
	Parameters  jsontext.Value `json:"parameters"`
	Strict      jsontext.Value `json:"strict"`
	Tools       jsontext.Value `json:"tools"`
	Extra       jsontext.Value `json:",embed"`
}

// ToolChoiceView is a tool_choice object.
type ToolChoiceView struct {
	Type  jsontext.Value `json:"type"`
	Name  jsontext.Value `json:"name"`
	Extra jsontext.Value `json:",embed"`
}

// TextView is a request's text.
type TextView struct {
	Format    jsontext.Value `json:"format"`
	Verbosity jsontext.Value `json:"verbosity"`
	Extra     jsontext.Value `json:",embed"`
}

// TextFormatView is text.format.
type TextFormatView struct {
	Type        jsontext.Value `json:"type"`
	Name        jsontext.Value `json:"name"`
	Schema      jsontext.Value `json:"schema"`
	Description jsontext.Value `json:"description"`
	Strict      jsontext.Value `json:"strict"`
	Extra       jsontext.Value `json:",embed"`
}

// ReasoningView is a request's reasoning.
type ReasoningView struct {
	Effort          jsontext.Value `json:"effort"`
	Summary         jsontext.Value `json:"summary"`
	GenerateSummary jsontext.Value `json:"generate_summary"`
	Extra           jsontext.Value `json:",embed"`
}

// StreamOptionsView is a request's stream_options.
type StreamOptionsView struct {
	IncludeObfuscation jsontext.Value `json:"include_obfuscation"`
	Extra              jsontext.Value `json:",embed"`
}
