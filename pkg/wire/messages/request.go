package messages

import (
	"errors"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The request's roles.
const (
	RoleUser   = "user"
	RoleSystem = "system"
)

// The request's content block types, beside the answer's (BlockText,
// BlockToolUse, BlockThinking, BlockRedactedThinking).
const (
	BlockImage         = "image"
	BlockDocument      = "document"
	BlockToolResult    = "tool_result"
	BlockServerToolUse = "server_tool_use"
)

// The image and document source types.
const (
	SourceBase64 = "base64"
	SourceURL    = "url"
	SourceText   = "text"
)

// The tool_choice types.
const (
	ToolChoiceAuto = "auto"
	ToolChoiceAny  = "any"
	ToolChoiceTool = "tool"
	ToolChoiceNone = "none"
)

// The thinking types.
const (
	ThinkingEnabled  = "enabled"
	ThinkingAdaptive = "adaptive"
	ThinkingDisabled = "disabled"
)

// Request is a request of POST /v1/messages, in Anthropic's field order.
// Numbers a reader passes on as the client wrote them (temperature, top_p,
// top_k) are kept as their JSON text; counts of tokens are float64, as the
// API takes 1e3 or 1000.0 for 1000 (a reader checks they are integers in
// its range), and pointers, as a reader tells absent from zero. Members the type does not model
// (service_tier, container, the gateway's own objects, a field Anthropic
// adds next month) are kept in Extra, in body order, and written back after
// the modelled ones: nothing is lost by a decode and an encode.
type Request struct {
	Model         string         `json:"model"`
	MaxTokens     *float64       `json:"max_tokens,omitzero"`
	System        Content        `json:"system,omitempty"`
	Messages      []InputMessage `json:"messages"`
	Stream        bool           `json:"stream"`
	Temperature   jsontext.Value `json:"temperature,omitzero"`
	TopP          jsontext.Value `json:"top_p,omitzero"`
	TopK          jsontext.Value `json:"top_k,omitzero"`
	StopSequences []string       `json:"stop_sequences,omitzero"`
	Tools         []Tool         `json:"tools,omitzero"`
	ToolChoice    *ToolChoice    `json:"tool_choice,omitzero"`
	Metadata      *Metadata      `json:"metadata,omitzero"`
	Thinking      *Thinking      `json:"thinking,omitzero"`
	OutputConfig  *OutputConfig  `json:"output_config,omitzero"`
	Extra         jsontext.Value `json:",embed"`
}

// InputMessage is one turn of a request's messages.
type InputMessage struct {
	Role    string         `json:"role"`
	Content Content        `json:"content"`
	Extra   jsontext.Value `json:",embed"`
}

// Content is a message's content, the system prompt, or a tool_result's
// content: a string (Text) or an array of content blocks (Blocks, non-nil;
// empty for []). It is written as an array when Blocks is non-nil, else as
// a string; a system prompt of neither text nor blocks is left out.
type Content struct {
	Text   string
	Blocks []Block
}

// errContent is a content neither a string nor an array.
var errContent = errors.New("must be a string or an array of content blocks")

// MarshalJSONTo writes c as an array of blocks or as a string.
func (c *Content) MarshalJSONTo(enc *jsontext.Encoder) error {
	if c.Blocks != nil {
		return jsonv2.MarshalEncode(enc, &c.Blocks)
	}
	return enc.WriteToken(jsontext.String(c.Text))
}

// UnmarshalJSONFrom reads a string or an array of blocks; null is the
// zero Content.
func (c *Content) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*c = Content{}
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '"':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		c.Text = tok.String()
		return nil
	case '[':
		c.Blocks = []Block{}
		return jsonv2.UnmarshalDecode(dec, &c.Blocks)
	}
	if err := dec.SkipValue(); err != nil {
		return err
	}
	return errContent
}

// Block is a content block of a request, of any type: text (Text,
// Citations), image (Source), document (Source, Title, Context,
// Citations), tool_use (ID, Name, Input), tool_result (ToolUseID, Content,
// IsError), thinking (Thinking, Signature), redacted_thinking (Data).
// CacheControl may be set on any of them. A member the type does not
// model (a new block type's own) is kept in Extra.
type Block struct {
	Type         string         `json:"type"`
	Text         string         `json:"text,omitzero"`
	Source       *Source        `json:"source,omitzero"`
	ID           string         `json:"id,omitzero"`
	Name         string         `json:"name,omitzero"`
	Input        jsontext.Value `json:"input,omitzero"`
	ToolUseID    string         `json:"tool_use_id,omitzero"`
	Content      *Content       `json:"content,omitzero"`
	IsError      *bool          `json:"is_error,omitzero"`
	Thinking     string         `json:"thinking,omitzero"`
	Signature    string         `json:"signature,omitzero"`
	Data         string         `json:"data,omitzero"`
	Title        string         `json:"title,omitzero"`
	Context      string         `json:"context,omitzero"`
	Citations    jsontext.Value `json:"citations,omitzero"`
	CacheControl *CacheControl  `json:"cache_control,omitzero"`
	Extra        jsontext.Value `json:",embed"`
}

// Source is an image's or a document's source: base64 (MediaType, Data),
// url (URL) or, for a document, text (MediaType, Data); or a search
// result's, a string (Name).
type Source struct {
	Type      string         `json:"type"`
	MediaType string         `json:"media_type,omitzero"`
	Data      string         `json:"data,omitzero"`
	URL       string         `json:"url,omitzero"`
	Extra     jsontext.Value `json:",embed"`
	Name      string         `json:"-"`
}

// sourceObject is Source's JSON object, without its methods.
type sourceObject Source

// MarshalJSONTo writes a source named by a string as that string, else as
// an object.
func (s *Source) MarshalJSONTo(enc *jsontext.Encoder) error {
	if s.Name != "" && s.Type == "" {
		return enc.WriteToken(jsontext.String(s.Name))
	}
	return jsonv2.MarshalEncode(enc, (*sourceObject)(s))
}

// UnmarshalJSONFrom reads a string or an object.
func (s *Source) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*s = Source{}
	if dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		s.Name = tok.String()
		return err
	}
	return jsonv2.UnmarshalDecode(dec, (*sourceObject)(s))
}

// CacheControl is a block's or a tool's cache breakpoint; TTL is "5m" or
// "1h" ("" for the default, five minutes).
type CacheControl struct {
	Type  string         `json:"type"`
	TTL   string         `json:"ttl,omitzero"`
	Extra jsontext.Value `json:",embed"`
}

// Tool is a tool definition: a custom tool (Type "" or "custom": Name,
// Description, InputSchema, Strict), or a server tool of Anthropic's
// (web_search_20250305, bash_20250124, ...: Type, Name, and members of its
// own in Extra).
type Tool struct {
	Type         string         `json:"type,omitzero"`
	Name         string         `json:"name"`
	Description  string         `json:"description,omitzero"`
	InputSchema  jsontext.Value `json:"input_schema,omitzero"`
	Strict       *bool          `json:"strict,omitzero"`
	CacheControl *CacheControl  `json:"cache_control,omitzero"`
	Extra        jsontext.Value `json:",embed"`
}

// Custom reports whether t is a tool the client runs (not a server tool).
func (t *Tool) Custom() bool { return t.Type == "" || t.Type == "custom" }

// ToolChoice is tool_choice: auto, any, tool (Name) or none. Its fields
// are in name order, the order encoding/json gives an object's members.
type ToolChoice struct {
	DisableParallelToolUse bool           `json:"disable_parallel_tool_use,omitzero"`
	Name                   string         `json:"name,omitzero"`
	Type                   string         `json:"type"`
	Extra                  jsontext.Value `json:",embed"`
}

// Metadata is a request's metadata.
type Metadata struct {
	UserID string         `json:"user_id"`
	Extra  jsontext.Value `json:",embed"`
}

// Thinking is extended thinking: enabled (BudgetTokens), adaptive or
// disabled.
type Thinking struct {
	Type         string         `json:"type"`
	BudgetTokens *float64       `json:"budget_tokens,omitzero"`
	Display      string         `json:"display,omitzero"`
	Extra        jsontext.Value `json:",embed"`
}

// OutputConfig is output_config: the effort, and a structured output's
// format.
type OutputConfig struct {
	Effort string         `json:"effort,omitzero"`
	Format *OutputFormat  `json:"format,omitzero"`
	Extra  jsontext.Value `json:",embed"`
}

// OutputFormat is output_config.format: json_schema (Schema).
type OutputFormat struct {
	Type   string         `json:"type"`
	Schema jsontext.Value `json:"schema,omitzero"`
	Extra  jsontext.Value `json:",embed"`
}

// encodeOptions write as encoding/json does (U+2028 and U+2029 escaped,
// HTML characters not), so that a body reads alike whichever wrote it, and
// let a member kept as it was read (Extra) hold what decodeOptions let in
// (invalid UTF-8, a name twice).
var encodeOptions = jsonv2.JoinOptions(jsontext.EscapeForJS(true), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// decodeOptions read as encoding/json does invalid UTF-8 (replaced) and a
// duplicate name (the last wins).
var decodeOptions = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// lastWins reads an object given twice under one name as the last alone,
// as a reader of maps does, rather than the two merged into one struct.
var lastWins = jsonv2.JoinUnmarshalers(
	replace(func(v *InputMessage) any { type plain InputMessage; return (*plain)(v) }),
	replace(func(v *Block) any { type plain Block; return (*plain)(v) }),
	replace(func(v *CacheControl) any { type plain CacheControl; return (*plain)(v) }),
	replace(func(v *Tool) any { type plain Tool; return (*plain)(v) }),
	replace(func(v *ToolChoice) any { type plain ToolChoice; return (*plain)(v) }),
	replace(func(v *Metadata) any { type plain Metadata; return (*plain)(v) }),
	replace(func(v *Thinking) any { type plain Thinking; return (*plain)(v) }),
	replace(func(v *OutputConfig) any { type plain OutputConfig; return (*plain)(v) }),
	replace(func(v *OutputFormat) any { type plain OutputFormat; return (*plain)(v) }),
)

// replace reads a T afresh, as plain (v as a type without this
// unmarshaler) reads it.
func replace[T any](plain func(*T) any) *jsonv2.Unmarshalers {
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *T) error {
		var zero T
		*v = zero
		return jsonv2.UnmarshalDecode(dec, plain(v))
	})
}

// MarshalWrite encodes a request (or any of its parts) compact, in field
// order, Extra's members last, into w: a writer sized for the body spares a
// copy of it.
func MarshalWrite(w io.Writer, v any) error { return jsonv2.MarshalWrite(w, v, encodeOptions) }

// Unmarshal decodes a request (or any of its parts). A member of the
// wrong JSON type is an error whose *jsonv2.SemanticError names it by
// JSON pointer; of a name given twice, the last value is read. us may add
// a reader's own unmarshalers (one that reads a member of the wrong type
// as absent, say), which come first.
func Unmarshal(b []byte, v any, us ...*jsonv2.Unmarshalers) error {
	return jsonv2.Unmarshal(b, v, decodeOptions, jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(append(us, lastWins)...)))
}
