package chat

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// jsonView is the view as encoding/json reads the body into a struct of
// its members: what DecodeRequestView must read, member for member and
// error for error.
type jsonView struct {
	Model               string            `json:"model"`
	Messages            []jsonMessage     `json:"messages"`
	MaxTokens           *float64          `json:"max_tokens"`
	MaxCompletionTokens *float64          `json:"max_completion_tokens"`
	Temperature         json.RawMessage   `json:"temperature"`
	TopP                json.RawMessage   `json:"top_p"`
	TopK                json.RawMessage   `json:"top_k"`
	Stop                json.RawMessage   `json:"stop"`
	Tools               []jsonTool        `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	User                string            `json:"user"`
	ReasoningEffort     OptString         `json:"reasoning_effort"`
	ResponseFormat      json.RawMessage   `json:"response_format"`
	N                   json.RawMessage   `json:"n"`
	Logprobs            json.RawMessage   `json:"logprobs"`
	TopLogprobs         json.RawMessage   `json:"top_logprobs"`
	LogitBias           json.RawMessage   `json:"logit_bias"`
	Audio               json.RawMessage   `json:"audio"`
	Modalities          []string          `json:"modalities"`
	Functions           json.RawMessage   `json:"functions"`
	FunctionCall        json.RawMessage   `json:"function_call"`
	Err                 string            `json:"-"`
	Members             []json.RawMessage `json:"-"` // key, value, ...
}

type jsonMessage struct {
	Role       string
	Content    json.RawMessage
	ToolCalls  []json.RawMessage
	ToolCallID string
	HasName    bool
	Null       bool
	Err        string
	Members    map[string]json.RawMessage
}

func (m *jsonMessage) UnmarshalJSON(b []byte) error {
	var in messageIn
	*m = jsonMessage{Null: string(b) == "null"}
	err := json.Unmarshal(b, &in)
	m.Role, m.Content, m.ToolCalls, m.ToolCallID = in.Role, in.Content, in.ToolCalls, in.ToolCallID
	if err != nil {
		m.Err = err.Error()
	}
	if b[0] == '{' {
		_ = json.Unmarshal(b, &m.Members)
	}
	if in.Name != nil && err == nil {
		name, ok := m.Members["name"]
		m.HasName = ok && string(name) != "null"
	}
	return nil
}

type jsonTool struct {
	Type     string
	Function RequestViewFunction
	Err      string
	Members  map[string]json.RawMessage
}

func (t *jsonTool) UnmarshalJSON(b []byte) error {
	var in struct {
		Type     string     `json:"type"`
		Function functionIn `json:"function"`
	}
	err := json.Unmarshal(b, &in)
	*t = jsonTool{Type: in.Type, Function: RequestViewFunction(in.Function)}
	if err != nil {
		t.Err = err.Error()
	}
	if b[0] == '{' {
		_ = json.Unmarshal(b, &t.Members)
	}
	return nil
}

// readByJSON is body read by encoding/json: the struct, and the members by
// exact name (a map, the last of two equal names winning).
func readByJSON(body []byte) (jsonView, map[string]json.RawMessage) {
	var v jsonView
	if err := json.Unmarshal(body, &v); err != nil {
		// As encoding/json names RequestView's types.
		v.Err = strings.NewReplacer("jsonView", "RequestView", "jsonMessage", "RequestViewMessage", "jsonTool", "RequestViewTool").Replace(err.Error())
	}
	// By exact name, as jsonobj.Parse reads them: between spaces of any
	// kind.
	var exact map[string]json.RawMessage
	if trimmed := bytes.TrimSpace(body); bytes.HasPrefix(trimmed, []byte("{")) && json.Unmarshal(trimmed, &exact) != nil {
		exact = nil
	}
	return v, exact
}

// asJSONView is v in jsonView's shape, its members by exact name in a map.
func asJSONView(v *RequestView, err error) (jsonView, map[string]json.RawMessage) {
	out := jsonView{
		Model: v.Model, MaxTokens: v.MaxTokens, MaxCompletionTokens: v.MaxCompletionTokens,
		Temperature: v.Temperature, TopP: v.TopP, TopK: v.TopK, Stop: v.Stop, ToolChoice: v.ToolChoice,
		ParallelToolCalls: v.ParallelToolCalls, User: v.User, ReasoningEffort: v.ReasoningEffort,
		ResponseFormat: v.ResponseFormat, N: v.N, Logprobs: v.Logprobs, TopLogprobs: v.TopLogprobs,
		LogitBias: v.LogitBias, Audio: v.Audio, Modalities: v.Modalities, Functions: v.Functions, FunctionCall: v.FunctionCall,
	}
	if err != nil {
		out.Err = err.Error()
	}
	if v.Messages != nil {
		out.Messages = []jsonMessage{}
	}
	for _, m := range v.Messages {
		jm := jsonMessage{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, HasName: m.HasName, Null: m.Null, Members: asMap(m.Members)}
		if m.Err != nil {
			jm.Err = m.Err.Error()
		}
		out.Messages = append(out.Messages, jm)
	}
	if v.Tools != nil {
		out.Tools = []jsonTool{}
	}
	for _, t := range v.Tools {
		jt := jsonTool{Type: t.Type, Function: t.Function, Members: asMap(t.Members)}
		if t.Err != nil {
			jt.Err = t.Err.Error()
		}
		out.Tools = append(out.Tools, jt)
	}
	return out, asMap(v.Members)
}

func asMap(o Object) map[string]json.RawMessage {
	if o == nil {
		return nil
	}
	m := map[string]json.RawMessage{}
	for _, mb := range o {
		// encoding/json reads each byte that is not UTF-8 as U+FFFD.
		m[string([]rune(mb.Key))] = mb.Value
	}
	return m
}

// checkSameAsJSON fails t unless DecodeRequestView reads body as
// encoding/json does.
func checkSameAsJSON(t *testing.T, body []byte) {
	t.Helper()
	v, err := DecodeRequestView(body)
	got, gotExact := asJSONView(v, err)
	want, wantExact := readByJSON(body)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", body, dump(got), dump(want))
	}
	if !reflect.DeepEqual(gotExact, wantExact) {
		t.Fatalf("%s: members\n got %v\nwant %v", body, gotExact, wantExact)
	}
	if json.Valid(body) && bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		i := 0
		for _, m := range v.Members { // in order, each name kept
			if !bytes.Contains(body[i:], m.Value) {
				t.Fatalf("%s: member %q out of order", body, m.Key)
			}
			i = bytes.Index(body[i:], m.Value) + i
		}
	}
	for i, m := range v.Messages {
		if m.HasName && m.Err != nil {
			t.Errorf("messages[%d]: a name beside an error", i)
		}
	}
}

func dump(v jsonView) string {
	b, _ := json.Marshal(struct {
		jsonView
		E string
	}{v, v.Err})
	return string(b)
}

// TestDecodeRequestViewAsJSON: generated bodies are read as encoding/json
// reads them, the members by exact name as it reads them into a map.
func TestDecodeRequestViewAsJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for range 4000 {
		checkSameAsJSON(t, []byte(genBody(r)))
	}
}

// FuzzDecodeRequestView: any body is read as encoding/json reads it.
func FuzzDecodeRequestView(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"Hi","name":"n"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
		`{"messages":[null,1,{"NAME":null}],"reasoning_effort":null}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte("\f{\"model\":1}\u00a0"))
	r := rand.New(rand.NewSource(2))
	for range 50 {
		f.Add([]byte(genBody(r)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSameAsJSON(t, body)
	})
}

// genBody writes a random Chat Completions request body for the
// differential tests: members of every kind a translation reads, names in
// other cases, escaped and given twice, values of the wrong type, and now
// and then a body that is not an object or not JSON.
func genBody(r *rand.Rand) string {
	genClean = r.Intn(2) == 0
	var b strings.Builder
	switch r.Intn(60) {
	case 0:
		return `[]`
	case 1:
		return `null`
	case 2:
		return `{"model":"m","messages":[{"role":"user","content":"x"}]`
	case 3:
		return `{"messages":[{"role":"user","content":"x"}]} {}`
	}
	keys := []string{"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
		"top_k", "stop", "tools", "tool_choice", "parallel_tool_calls", "user", "reasoning_effort",
		"response_format", "n", "logprobs", "top_logprobs", "logit_bias", "audio", "modalities",
		"functions", "function_call", "stream", "stream_options", "seed", "store", "prediction",
		"verbosity", "metadata", "service_tier", "safety_identifier", "prompt_cache_key",
		"prompt_cache_retention", "frequency_penalty", "presence_penalty", "web_search_options", "name", "x_other"}
	b.WriteString("{")
	n := r.Intn(8)
	first := true
	member := func(k, v string) {
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(genSpace(r))
		b.WriteString(genKey(r, k))
		b.WriteString(genSpace(r) + ":" + genSpace(r))
		b.WriteString(v)
	}
	if r.Intn(10) > 0 {
		member("messages", genMessages(r))
	}
	if r.Intn(3) == 0 {
		member("model", genValue(r, "model"))
	}
	for range n {
		k := keys[r.Intn(len(keys))]
		if genClean && r.Intn(10) > 0 {
			k = cleanKeys[r.Intn(len(cleanKeys))]
		}
		member(k, genValue(r, k))
	}
	b.WriteString(genSpace(r) + "}")
	return b.String()
}

// cleanKeys are members most translations accept.
var cleanKeys = []string{"model", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"tools", "tool_choice", "parallel_tool_calls", "user", "stream", "stream_options", "seed", "store",
	"metadata", "service_tier", "safety_identifier", "prompt_cache_key", "verbosity", "name", "x_other", "top_k", "reasoning_effort", "response_format"}

// genClean: the body being written is mostly one a translation accepts.
var genClean bool

// pick is one of vs; while genClean, one of the first clean of them.
func pick(r *rand.Rand, clean int, vs ...string) string {
	if genClean && clean > 0 && r.Intn(20) > 0 {
		return vs[r.Intn(clean)]
	}
	return vs[r.Intn(len(vs))]
}

// odd reports true one time in n, far less while genClean.
func odd(r *rand.Rand, n int) bool {
	if genClean {
		n *= 20
	}
	return r.Intn(n) == 0
}

func genSpace(r *rand.Rand) string {
	if r.Intn(8) == 0 {
		return " \n\t"[:1+r.Intn(3)]
	}
	return ""
}

// genKey writes k as a member name: as it is mostly, else in another case,
// escaped, or with a byte that is not UTF-8.
func genKey(r *rand.Rand, k string) string {
	if genClean && r.Intn(20) > 0 {
		return `"` + k + `"`
	}
	switch r.Intn(30) {
	case 0:
		return strconv.Quote(strings.ToUpper(k))
	case 1:
		return strconv.Quote(strings.ToUpper(k[:1]) + k[1:])
	case 2:
		return `"\u00` + strconv.FormatInt(int64(k[0]), 16) + k[1:] + `"`
	case 3:
		return `"` + k + "\xff" + `"`
	case 4:
		return `"` + strings.Replace(k, "k", "\u212a", 1) + `"`
	}
	return `"` + k + `"`
}

func genAny(r *rand.Rand, depth int) string {
	switch r.Intn(9) {
	case 0:
		return "null"
	case 1:
		return []string{"0", "1", "2", "-1", "0.5", "1e400", "3.0", "1.5", "4096", "0.0"}[r.Intn(10)]
	case 2:
		return []string{`""`, `"x"`, `"text"`, `"auto"`, `"a\u00e9"`, `"\ud800"`, "\"\xff\"", `"low"`}[r.Intn(8)]
	case 3:
		return []string{"true", "false"}[r.Intn(2)]
	case 4:
		if depth > 2 {
			return "[]"
		}
		return "[" + genAny(r, depth+1) + "," + genAny(r, depth+1) + "]"
	case 5:
		return "[]"
	case 6:
		return "{}"
	case 7:
		if depth > 2 {
			return "{}"
		}
		return `{"type":` + genAny(r, depth+1) + `,"a":` + genAny(r, depth+1) + "}"
	}
	return `["text"]`
}

func genValue(r *rand.Rand, k string) string {
	if odd(r, 6) {
		return genAny(r, 0)
	}
	switch k {
	case "model", "user", "safety_identifier", "prompt_cache_key", "service_tier", "verbosity", "reasoning_effort", "prompt_cache_retention":
		return pick(r, 4, `"high"`, `"low"`, `"m"`, `null`, `""`, `"x\u0000"`)
	case "messages":
		return genMessages(r)
	case "max_tokens", "max_completion_tokens", "n", "top_logprobs", "seed", "top_k":
		return pick(r, 3, "1", "100", "null", "0", "5", "2", "1.5", "-1", "2147483648", `"5"`)
	case "temperature", "top_p", "frequency_penalty", "presence_penalty":
		return pick(r, 5, "0", "0.0", "0.7", "1", "null", "2", "1e39", `"x"`)
	case "stop":
		return pick(r, 3, `""`, `[]`, `null`, `"END"`, `["a",""]`, `["a",1]`, `5`)
	case "tools":
		return genTools(r)
	case "tool_choice":
		return pick(r, 5, `"auto"`, `"none"`, `"required"`, `{"type":"function","function":{"name":"f"}}`,
			`{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}`, `"x"`,
			`{"type":"function","function":{}}`, `{"type":"function"}`,
			`{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}`,
			`{"type":"allowed_tools","allowed_tools":{"tools":[{"type":"x"}]}}`, `{"type":"allowed_tools","allowed_tools":5}`, `{"type":"x"}`, `null`)
	case "parallel_tool_calls", "logprobs", "store", "stream":
		return pick(r, 3, "true", "false", "null", "1")
	case "response_format":
		return pick(r, 4, `{"type":"text"}`, `{"type":"json_object"}`, `{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true,"description":"d"}}`,
			`null`, `{"type":"json_schema","json_schema":{"schema":{}}}`, `{"type":"json_schema"}`, `{"type":"x"}`, `{}`, `"json"`)
	case "logit_bias", "metadata", "stream_options", "prediction", "web_search_options":
		return []string{`{}`, `{"1":2}`, `null`, `{"include_usage":true}`}[r.Intn(4)]
	case "audio":
		return []string{`{"voice":"x"}`, `null`}[r.Intn(2)]
	case "modalities":
		return pick(r, 3, `["text"]`, `[]`, `null`, `["text","audio"]`, `[1]`, `"text"`)
	case "functions", "function_call":
		return []string{`[]`, `"auto"`, `null`}[r.Intn(3)]
	}
	return genAny(r, 0)
}

func genMessages(r *rand.Rand) string {
	if odd(r, 25) {
		return genAny(r, 0)
	}
	n := r.Intn(5)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = genMessage(r)
	}
	return "[" + strings.Join(parts, ","+genSpace(r)) + "]"
}

func genMessage(r *rand.Rand) string {
	if odd(r, 10) {
		return pick(r, 0, "null", `"hi"`, "[]")
	}
	var ms []string
	role := pick(r, 5, "system", "developer", "user", "assistant", "tool", "x", "")
	if !odd(r, 12) {
		ms = append(ms, genKey(r, "role")+":"+strconv.Quote(role))
	} else {
		ms = append(ms, genKey(r, "role")+":"+genAny(r, 0))
	}
	if r.Intn(6) > 0 {
		ms = append(ms, genKey(r, "content")+":"+genContent(r))
	}
	if role == "assistant" && r.Intn(2) == 0 || odd(r, 15) {
		ms = append(ms, genKey(r, "tool_calls")+":"+genToolCalls(r))
	}
	if role == "tool" && !odd(r, 5) || odd(r, 15) {
		ms = append(ms, genKey(r, "tool_call_id")+":"+pick(r, 1, `"c1"`, `""`, `5`, `null`))
	}
	if r.Intn(6) == 0 {
		ms = append(ms, genKey(r, "name")+":"+[]string{`"bob"`, `null`, `5`}[r.Intn(3)])
	}
	if r.Intn(8) == 0 {
		ms = append(ms, genKey(r, "refusal")+":"+[]string{`"no"`, `null`, `""`}[r.Intn(3)])
	}
	if odd(r, 10) {
		ms = append(ms, ms[r.Intn(len(ms))])
	}
	r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	return "{" + strings.Join(ms, ",") + "}"
}

func genContent(r *rand.Rand) string {
	switch r.Intn(8) {
	case 0:
		return "null"
	case 1:
		return `""`
	case 2:
		return `"Hello"`
	case 3:
		if odd(r, 1) {
			return genAny(r, 0)
		}
	}
	n := r.Intn(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = pick(r, 4,
			`{"type":"text","text":"a"}`, `{"type":"text","text":""}`, `{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}`,
			`{"type":"refusal","refusal":"r"}`, `{"type":"text"}`, `{"type":"text","text":5}`, `{"type":"refusal","refusal":7}`,
			`{"type":"image_url","image_url":{"url":"https://x/y.png"}}`, `{"type":"image_url","image_url":{}}`, `{"type":"image_url"}`,
			`{"type":"image_url","image_url":{"url":"data:image/bmp;base64,AA=="}}`,
			`{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}`, `{"type":"input_audio","input_audio":5}`,
			`{"type":"file","file":{"file_id":"f"}}`, `{"type":"file","file":{}}`, `{"type":"file"}`,
			`{"type":"x"}`, `5`, `null`, `{"TYPE":"text","text":"b"}`)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func genToolCalls(r *rand.Rand) string {
	if odd(r, 10) {
		return genAny(r, 0)
	}
	n := r.Intn(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = pick(r, 2,
			`{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}`,
			`{"id":"c2","function":{"name":"g","arguments":""}}`,
			`{"id":"c3","type":"function","function":{"name":"f","arguments":"[1]"}}`,
			`{"id":"c4","type":"function","function":{"name":"f","arguments":5}}`,
			`{"id":"c5","type":"custom","function":{"name":"f"}}`,
			`{"id":"","type":"function","function":{"name":"f","arguments":"{}"}}`,
			`{"id":"c6","type":"function","function":5}`, `{"id":"c7"}`, `5`, `null`,
			`{"id":"c8","type":"function","function":{"name":"f","arguments":"{\"\":1}"}}`)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func genTools(r *rand.Rand) string {
	if odd(r, 10) {
		return genAny(r, 0)
	}
	n := r.Intn(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = pick(r, 3,
			`{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"number"}}},"strict":true}}`,
			`{"type":"function","function":{"name":"g"}}`, `{"type":"function","function":{"name":"i","strict":false,"description":"x"}}`, `{"type":"function","function":{"name":""}}`,
			`{"type":"function","function":{"name":"h","parameters":[1]}}`, `{"type":"function","function":{"name":"h","parameters":{"":1}}}`,
			`{"type":"function","function":{"name":"i","strict":false,"description":5}}`,
			`{"type":"function","function":5}`, `{"type":"custom","custom":{}}`, `{"type":5}`, `5`, `null`,
			`{"Type":"function","function":{"name":"j"}}`, `{"type":"function","function":{"name":"k","Name":"K"}}`)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
