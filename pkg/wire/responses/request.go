package responses

import "encoding/json"

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
