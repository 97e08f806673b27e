package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/internal/jsonstr"
)

// Limits of the per-request bounds (docs/api.md#fields-the-gateway-owns).
const (
	MaxCallsPerRequest     = 8
	MaxAttemptsPerRouteCap = 4
	MaxBackoff             = 60 * time.Second
	maxModelLen            = 256
	maxProviderNames       = 64
)

// Sort orders a model's routes by a measure instead of the preset order.
type Sort string

const (
	SortNone       Sort = ""
	SortPrice      Sort = "price"
	SortThroughput Sort = "throughput"
	SortLatency    Sort = "latency"
)

// Model suffixes that pick a sort.
const (
	SuffixFloor = ":floor"
	SuffixNitro = ":nitro"
)

// ChatRequest is a decoded and validated Chat Completions request. The
// fields the gateway reads are parsed out; everything else stays in the raw
// top-level fields and passes through to the provider.
type ChatRequest struct {
	// Model is the model id without its suffix; Suffix is ":floor", ":nitro"
	// or "".
	Model  string
	Suffix string
	Stream bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	Gateway      GatewayOptions
	Provider     ProviderPreferences
	// Native, when set, is the client's request in its own protocol, sent
	// as it is to a route that speaks it (Caps.Native).
	Native *Native
	// ChatErr, when set, is why the client's request has no Chat
	// Completions form (its translation failed, NewRoutingRequest): only a
	// route that speaks its protocol can serve it, and the others are
	// passed over.
	ChatErr error
	// Dropped are the client's fields a translation to Chat Completions
	// leaves out (hints that do not change the answer), named in the
	// answer's x-gateway-dropped header when a route of another protocol
	// serves it.
	Dropped []string

	// translator, when set, makes the Chat Completions form on first use
	// (TranslateWith).
	translator Translator
	// translation is what the translation made besides the Chat
	// Completions form (Translation).
	translation Translation

	fields map[string]json.RawMessage
	size   int
	// noObjectKey: the body was scanned whole and has no member named as
	// one of ObjectKeys (MayNameObject).
	noObjectKey bool
}

// MayNameObject is false when the request's body, decoded by
// DecodeChatRequest, has no member named as one of ObjectKeys at any
// depth, and so cannot refer to an object stored at the provider; true
// otherwise, and for a request made any other way.
func (r *ChatRequest) MayNameObject() bool { return !r.noObjectKey }

// GatewayFields are the top-level request members the gateway owns on
// every API: "gateway" (this request's bounds, GatewayOptions) and
// "provider" (its provider preferences). The gateway reads them and sends
// them to no upstream.
var GatewayFields = []string{"gateway", "provider"}

// GatewayOptions is the request's "gateway" object: bounds for this request.
type GatewayOptions struct {
	// MaxAttemptsPerRoute caps the calls to one provider (1 to 4); 0 means
	// the default.
	MaxAttemptsPerRoute int
	// MaxTotalAttempts caps the calls in all (1 to 8); 0 means 8.
	MaxTotalAttempts int
	// Backoff is the wait before a throttled provider is called again;
	// BackoffSet tells an explicit 0 from an absent field.
	Backoff    time.Duration
	BackoffSet bool
	// AllowFallbacks is gateway.routing.allow_fallbacks; nil means true.
	AllowFallbacks *bool
}

// ProviderPreferences is the request's "provider" object.
type ProviderPreferences struct {
	Order          []string
	Only           []string
	Ignore         []string
	AllowFallbacks *bool
	ZDR            bool
	// DataCollection is "", "allow" or "deny".
	DataCollection string
	Sort           Sort
}

// Size is the request body's length in bytes.
func (r *ChatRequest) Size() int { return r.size }

// DecodeChatRequest parses and validates a Chat Completions request body.
// Every problem is an *Error with code invalid_request naming the field.
// The request keeps slices of body: body must not be changed afterwards.
func DecodeChatRequest(body []byte) (*ChatRequest, error) {
	return decodeChatRequest(body, false)
}

// DecodeCheckedChatRequest is DecodeChatRequest for a body that another
// parser checks in full, as a keyed request's fingerprint does (its
// canonical form refuses whatever encoding/json refuses, and more): the
// strings it skips over (message contents, tool schemas) are searched for
// their end only, not checked again, so that a large body is not checked
// twice. The caller must refuse the request if that other check fails.
func DecodeCheckedChatRequest(body []byte) (*ChatRequest, error) {
	return decodeChatRequest(body, true)
}

// bodyError is the error of a body that encoding/json could not read into
// an object (err).
func bodyError(body []byte, err error) *Error {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) || len(bytes.TrimSpace(body)) == 0 {
		return Invalid("", "request body is not valid JSON: %s", jsonProblem(err))
	}
	return Invalid("", "request body must be a JSON object")
}

func decodeChatRequest(body []byte, checked bool) (*ChatRequest, error) {
	// The fast path: one scan, no copies, no reflection. It refuses a
	// member name given twice, at any depth, unless another parser checks
	// the body (a checked body's fingerprint refuses it).
	s := scanner{b: body, quotesOnly: checked, split: parallelMessages, unique: !checked, noteObjects: true}
	fields, msgsOK, ok := s.splitChat()
	if s.dup != nil {
		return nil, DuplicateMember(*s.dup, s.dupTop)
	}
	if !ok {
		if err := json.Unmarshal(body, &fields); err != nil {
			return nil, bodyError(body, err)
		}
		if !checked {
			if err := CheckUnique(body); err != nil {
				return nil, err
			}
		}
	}
	if fields == nil {
		return nil, Invalid("", "request body must be a JSON object")
	}
	r, err := newChatRequest(fields, len(body), msgsOK)
	if r != nil {
		// Only a scan that read every member name knows there is none.
		r.noObjectKey = ok && !s.objectKey
	}
	return r, err
}

// newChatRequest is the request of a body of size bytes split into its
// top-level members (fields), checked as DecodeChatRequest checks it but
// for a member name given twice, which the splitting refused; msgsOK says
// that its messages are known to pass checkMessages.
func newChatRequest(fields map[string]json.RawMessage, size int, msgsOK bool) (*ChatRequest, error) {
	r := &ChatRequest{fields: fields, size: size}
	if err := r.decodeModel(fields); err != nil {
		return nil, err
	}
	if !msgsOK {
		if err := checkMessages(fields["messages"]); err != nil {
			return nil, err
		}
	}
	var err error
	if r.Stream, err = boolField(fields, "stream", "stream"); err != nil {
		return nil, err
	}
	if raw, ok := present(fields, "stream_options"); ok {
		opts, err := object(raw, "stream_options")
		if err != nil {
			return nil, err
		}
		if r.IncludeUsage, err = boolField(opts, "include_usage", "stream_options.include_usage"); err != nil {
			return nil, err
		}
	}
	if err := r.decodeOptions(fields); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeModel reads the required model and its suffix.
func (r *ChatRequest) decodeModel(fields map[string]json.RawMessage) error {
	model, err := stringField(fields, "model", true)
	if err != nil {
		return err
	}
	if len(model) > maxModelLen {
		return Invalid("model", "model is longer than %d bytes", maxModelLen)
	}
	r.Model = model
	for _, s := range []string{SuffixFloor, SuffixNitro} {
		if strings.HasSuffix(model, s) {
			r.Model, r.Suffix = strings.TrimSuffix(model, s), s
		}
	}
	return nil
}

// decodeOptions reads the gateway-owned objects (GatewayFields).
func (r *ChatRequest) decodeOptions(fields map[string]json.RawMessage) error {
	if raw, ok := present(fields, "gateway"); ok {
		if err := r.decodeGateway(raw); err != nil {
			return err
		}
	}
	if raw, ok := present(fields, "provider"); ok {
		if err := r.decodeProvider(raw); err != nil {
			return err
		}
	}
	return nil
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "unexpected " + te.Value
	}
	return "unexpected end of input"
}

// present returns a field that is there and not null.
func present(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func object(raw json.RawMessage, param string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, Invalid(param, "%s must be an object", param)
	}
	return m, nil
}

func stringField(m map[string]json.RawMessage, name string, required bool) (string, error) {
	raw, ok := present(m, name)
	if !ok {
		if required {
			return "", Invalid(name, "%s is required", name)
		}
		return "", nil
	}
	var s string
	if sc := (scanner{b: raw}); raw[0] != '"' || !sc.str(&s) || sc.i != len(raw) {
		return "", Invalid(name, "%s must be a string", name)
	}
	if required && s == "" {
		return "", Invalid(name, "%s must not be empty", name)
	}
	return s, nil
}

func boolField(m map[string]json.RawMessage, name, param string) (bool, error) {
	raw, ok := present(m, name)
	if !ok {
		return false, nil
	}
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, Invalid(param, "%s must be a boolean", param)
}

func optBool(m map[string]json.RawMessage, name, param string) (*bool, error) {
	if _, ok := present(m, name); !ok {
		return nil, nil
	}
	b, err := boolField(m, name, param)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// intField reads an integer in [lo, hi]; absent or null reads as 0.
func intField(m map[string]json.RawMessage, name, param string, lo, hi int) (int, error) {
	raw, ok := present(m, name)
	if !ok {
		return 0, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || raw[0] == '"' {
		return 0, Invalid(param, "%s must be an integer", param)
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, Invalid(param, "%s must be an integer from %d to %d", param, lo, hi)
	}
	return int(f), nil
}

func checkMessages(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return Invalid("messages", "messages is required")
	}
	if messagesOK(raw) {
		return nil
	}
	return checkMessagesJSON(raw)
}

// checkMessagesJSON is checkMessages through encoding/json, which names
// the problem.
func checkMessagesJSON(raw json.RawMessage) error {
	// Only the shape is checked here (an array of objects with a role); the
	// rest of each message is the provider's to judge.
	var msgs []*struct {
		Role json.RawMessage `json:"role"`
	}
	if raw[0] != '[' || json.Unmarshal(raw, &msgs) != nil {
		// Either not an array, or an element that is not an object.
		var any []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &any) != nil {
			return Invalid("messages", "messages must be an array")
		}
		for i, m := range any {
			if len(m) == 0 || m[0] != '{' {
				return Invalid(fmt.Sprintf("messages[%d]", i), "messages[%d] must be an object", i)
			}
		}
		return Invalid("messages", "messages must be an array of objects")
	}
	if len(msgs) == 0 {
		return Invalid("messages", "messages must not be empty")
	}
	for i, m := range msgs {
		if m == nil {
			return Invalid(fmt.Sprintf("messages[%d]", i), "messages[%d] must be an object", i)
		}
		var role string
		if len(m.Role) == 0 || m.Role[0] != '"' || json.Unmarshal(m.Role, &role) != nil || role == "" {
			return Invalid(fmt.Sprintf("messages[%d].role", i), "messages[%d].role must be a non-empty string", i)
		}
	}
	return nil
}

func unknownKeys(m map[string]json.RawMessage, param string, known ...string) error {
	if name, ok := UnknownField(m, known...); ok {
		return Invalid(param+"."+name, "unknown field %s.%s", param, name)
	}
	return nil
}

// UnknownField returns the field of the JSON object m that is not in known
// and comes first in sorted order, so that a request's error does not
// depend on map order; ok is false when every field is known. A name that
// is not valid UTF-8 or longer than 64 bytes reads "(unprintable)", as an
// error message may be logged and shown.
func UnknownField(m map[string]json.RawMessage, known ...string) (name string, ok bool) {
	for k := range m {
		if !slices.Contains(known, k) && (!ok || k < name) {
			name, ok = k, true
		}
	}
	if ok && (!utf8.ValidString(name) || len(name) > 64) {
		name = "(unprintable)"
	}
	return name, ok
}

func (r *ChatRequest) decodeGateway(raw json.RawMessage) error {
	g, err := object(raw, "gateway")
	if err != nil {
		return err
	}
	if err := unknownKeys(g, "gateway", "retry", "routing"); err != nil {
		return err
	}
	if raw, ok := present(g, "retry"); ok {
		retry, err := object(raw, "gateway.retry")
		if err != nil {
			return err
		}
		if err := unknownKeys(retry, "gateway.retry", "max_attempts_per_route", "max_total_attempts", "backoff"); err != nil {
			return err
		}
		if r.Gateway.MaxAttemptsPerRoute, err = intField(retry, "max_attempts_per_route", "gateway.retry.max_attempts_per_route", 1, MaxAttemptsPerRouteCap); err != nil {
			return err
		}
		if r.Gateway.MaxTotalAttempts, err = intField(retry, "max_total_attempts", "gateway.retry.max_total_attempts", 1, MaxCallsPerRequest); err != nil {
			return err
		}
		if raw, ok := present(retry, "backoff"); ok {
			d, err := parseBackoff(raw)
			if err != nil {
				return err
			}
			r.Gateway.Backoff, r.Gateway.BackoffSet = d, true
		}
	}
	if raw, ok := present(g, "routing"); ok {
		routing, err := object(raw, "gateway.routing")
		if err != nil {
			return err
		}
		if err := unknownKeys(routing, "gateway.routing", "allow_fallbacks"); err != nil {
			return err
		}
		if r.Gateway.AllowFallbacks, err = optBool(routing, "allow_fallbacks", "gateway.routing.allow_fallbacks"); err != nil {
			return err
		}
	}
	return nil
}

// parseBackoff reads gateway.retry.backoff: a number of milliseconds, or a
// duration string such as "250ms" or "2s"; 0 to 60 seconds.
func parseBackoff(raw json.RawMessage) (time.Duration, error) {
	const param = "gateway.retry.backoff"
	var d time.Duration
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, Invalid(param, "%s must be milliseconds or a duration such as \"500ms\"", param)
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, Invalid(param, "%s must be milliseconds or a duration such as \"500ms\"", param)
		}
		d = v
	} else {
		ms, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsNaN(ms) || ms < 0 || ms > float64(MaxBackoff/time.Millisecond) {
			return 0, Invalid(param, "%s must be from 0 to 60000 milliseconds", param)
		}
		d = time.Duration(ms * float64(time.Millisecond))
	}
	if d < 0 || d > MaxBackoff {
		return 0, Invalid(param, "%s must be from 0 to 60 seconds", param)
	}
	return d, nil
}

func (r *ChatRequest) decodeProvider(raw json.RawMessage) error {
	p, err := object(raw, "provider")
	if err != nil {
		return err
	}
	if err := unknownKeys(p, "provider", "order", "only", "ignore", "allow_fallbacks", "zdr", "data_collection", "sort"); err != nil {
		return err
	}
	lists := []struct {
		name string
		dst  *[]string
	}{{"order", &r.Provider.Order}, {"only", &r.Provider.Only}, {"ignore", &r.Provider.Ignore}}
	for _, l := range lists {
		raw, ok := present(p, l.name)
		if !ok {
			continue
		}
		param := "provider." + l.name
		var names []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &names) != nil {
			return Invalid(param, "%s must be an array of provider names", param)
		}
		if len(names) > maxProviderNames {
			return Invalid(param, "%s has more than %d names", param, maxProviderNames)
		}
		out := make([]string, 0, len(names))
		for i, n := range names {
			var s string
			if len(n) == 0 || n[0] != '"' || json.Unmarshal(n, &s) != nil || s == "" {
				return Invalid(fmt.Sprintf("%s[%d]", param, i), "%s[%d] must be a provider name", param, i)
			}
			out = append(out, s)
		}
		*l.dst = out
	}
	if r.Provider.AllowFallbacks, err = optBool(p, "allow_fallbacks", "provider.allow_fallbacks"); err != nil {
		return err
	}
	if r.Provider.ZDR, err = boolField(p, "zdr", "provider.zdr"); err != nil {
		return err
	}
	dc, err := stringField(p, "data_collection", false)
	if err != nil {
		return Invalid("provider.data_collection", "provider.data_collection must be \"allow\" or \"deny\"")
	}
	switch dc {
	case "", "allow", "deny":
		r.Provider.DataCollection = dc
	default:
		return Invalid("provider.data_collection", "provider.data_collection must be \"allow\" or \"deny\"")
	}
	sort, err := stringField(p, "sort", false)
	if err != nil {
		return Invalid("provider.sort", "provider.sort must be \"price\", \"throughput\" or \"latency\"")
	}
	switch Sort(sort) {
	case SortNone, SortPrice, SortThroughput, SortLatency:
		r.Provider.Sort = Sort(sort)
	default:
		return Invalid("provider.sort", "provider.sort must be \"price\", \"throughput\" or \"latency\"")
	}
	return nil
}

// UpstreamBody is UpstreamParts joined into one body.
func (r *ChatRequest) UpstreamBody(upstreamModel string) ([]byte, error) {
	parts, err := r.UpstreamParts(upstreamModel)
	if err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}

// UpstreamParts is the body sent to a provider, as pieces to send in order:
// the client's fields without the gateway-owned "gateway" and "provider",
// with "model" replaced, and always streaming with usage, whatever the
// client asked (the answer is reassembled for a non-streaming client and
// usage is dropped again when the client did not ask for it).
func (r *ChatRequest) UpstreamParts(upstreamModel string) ([][]byte, error) {
	if r.translator != nil || r.ChatErr != nil {
		if err := r.translated(); err != nil {
			return nil, err
		}
	}
	opts := []byte(`{"include_usage":true}`)
	if raw, ok := present(r.fields, "stream_options"); ok {
		m := map[string]json.RawMessage{}
		_ = json.Unmarshal(raw, &m)
		m["include_usage"] = json.RawMessage("true")
		var err error
		if opts, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(r.fields))
	for k := range r.fields {
		switch {
		case k == "model", k == "stream", k == "stream_options", slices.Contains(GatewayFields, k):
		default:
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	// The values are the client's own, already validated by the decoder, so
	// they are sent as they are rather than re-encoded, the large ones from
	// where they are; the model and the keys are written as encoding/json
	// writes strings (jsonstr, html on).
	p := newPartsWriter(len(upstreamModel) + len(opts) + 64 + 16*len(keys))
	p.buf = append(p.buf, `{"model":`...)
	p.buf = jsonstr.Append(p.buf, upstreamModel, true)
	p.buf = append(p.buf, `,"stream":true,"stream_options":`...)
	p.buf = append(p.buf, opts...)
	for _, k := range keys {
		p.buf = append(p.buf, ',')
		p.buf = jsonstr.Append(p.buf, k, true)
		p.buf = append(p.buf, ':')
		p.value(r.fields[k])
	}
	p.buf = append(p.buf, '}')
	return p.done(), nil
}

// DataDemand is what a request demands of a provider's data handling, from
// least to most strict.
type DataDemand int

const (
	// DemandNone: any provider.
	DemandNone DataDemand = iota
	// DemandZDR: zero data retention.
	DemandZDR
	// DemandDeny: no training and no retention.
	DemandDeny
)

func (d DataDemand) String() string {
	switch d {
	case DemandZDR:
		return "zdr"
	case DemandDeny:
		return "deny"
	}
	return "none"
}

// ParseDataPolicy reads a project's data_policy: none, zdr or deny.
func ParseDataPolicy(s string) DataDemand {
	switch s {
	case "zdr":
		return DemandZDR
	case "deny":
		return DemandDeny
	}
	return DemandNone
}

// Demand is the stricter of the request's own demand (provider.zdr,
// provider.data_collection) and the project's data policy.
func (r *ChatRequest) Demand(project DataDemand) DataDemand {
	d := project
	if r.Provider.ZDR && d < DemandZDR {
		d = DemandZDR
	}
	if r.Provider.DataCollection == "deny" && d < DemandDeny {
		d = DemandDeny
	}
	return d
}

// messageFields are the message fields messagesOK reads.
var messageFields = []string{"role"}

// messagesOK reports true only when checkMessages's checks pass for sure: an
// array of at least one object, each with one "role" key (matched exactly)
// whose value is a non-empty string. Anything else (an error, or a shape
// only encoding/json's rules settle: a key like "Role", a role given twice)
// is false, and the checks run through encoding/json, which names the
// problem. FuzzMessagesOK checks that true is never wrong.
func messagesOK(raw json.RawMessage) bool {
	s := scanner{b: raw}
	ok := s.messages()
	s.ws()
	return ok && s.i == len(raw)
}
