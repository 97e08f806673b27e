package systemtest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/providertest"
	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// The translation table (docs/translation.md) and its tests: the doc says,
// per client API, what each field, block and answer event becomes on each
// upstream; TestTranslationTable runs every cell.

const translationDoc = "../../docs/translation.md"

// tableCell is one cell of the doc's tables.
type tableCell struct {
	api, row, upstream string
	kind               string // native, translated, absent, hint, refused
	path               string // translated, absent: the path; hint and refused: the name
	value              string // translated: the JSON value, "" for any
	stream             string // an answer row's text the stream must contain
}

var (
	tableMarker = regexp.MustCompile(`^<!-- table: (\w+) -->$`)
	pathToken   = regexp.MustCompile(`([^.\[\]]+)|\[(\d*)\]`)
)

// readTranslationTable parses docs/translation.md's tables.
func readTranslationTable(t *testing.T) []tableCell {
	t.Helper()
	f, err := os.Open(translationDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cells []tableCell
	var api string
	var columns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := tableMarker.FindStringSubmatch(line); m != nil {
			api, columns = m[1], nil
			continue
		}
		if api == "" {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if columns != nil {
				api = "" // the table ended
			}
			continue
		}
		parts := strings.Split(strings.Trim(line, "|"), "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		switch {
		case columns == nil:
			columns = parts
			continue
		case strings.HasPrefix(parts[0], "---"):
			continue
		}
		if len(parts) != len(columns) {
			t.Fatalf("%s table: row %q has %d cells, want %d", api, parts[0], len(parts), len(columns))
		}
		row := strings.TrimSpace(strings.ReplaceAll(parts[0], "`", ""))
		for i := 1; i < len(parts); i++ {
			c, err := parseCell(parts[i])
			if err != nil {
				t.Fatalf("%s table, row %q, column %s: %v", api, row, columns[i], err)
			}
			c.api, c.row, c.upstream = api, row, columns[i]
			cells = append(cells, c)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cells
}

// parseCell reads "kind: spec — note".
func parseCell(s string) (tableCell, error) {
	s, _, _ = strings.Cut(s, " — ")
	s = strings.ReplaceAll(s, "`", "")
	kind, spec, _ := strings.Cut(s, ":")
	c := tableCell{kind: strings.TrimSpace(kind)}
	spec = strings.TrimSpace(spec)
	switch c.kind {
	case "native":
		return c, nil
	case "hint", "refused", "absent":
		c.path = spec
	case "translated":
		spec, stream, _ := strings.Cut(spec, "; stream: ")
		c.stream = strings.TrimSpace(stream)
		path, value, _ := strings.Cut(spec, " = ")
		c.path, c.value = strings.TrimSpace(path), strings.TrimSpace(value)
		if c.value != "" && !json.Valid([]byte(c.value)) {
			return c, fmt.Errorf("value %s is not JSON", c.value)
		}
	default:
		return c, fmt.Errorf("unknown kind %q", c.kind)
	}
	if c.path == "" {
		return c, fmt.Errorf("%s without a path or name", c.kind)
	}
	return c, nil
}

// lookup returns the values at path in v ("a.b[0].c", "[]" any element).
func lookup(v any, path string) []any {
	vals := []any{v}
	for _, m := range pathToken.FindAllStringSubmatch(path, -1) {
		var next []any
		for _, cur := range vals {
			switch {
			case m[1] != "":
				if obj, ok := cur.(map[string]any); ok {
					if x, ok := obj[m[1]]; ok {
						next = append(next, x)
					}
				}
			case m[2] == "":
				if arr, ok := cur.([]any); ok {
					next = append(next, arr...)
				}
			default:
				i, _ := strconv.Atoi(m[2])
				if arr, ok := cur.([]any); ok && i < len(arr) {
					next = append(next, arr[i])
				}
			}
		}
		vals = next
	}
	return vals
}

// hasValue reports whether doc has value (JSON; "" for any) at path.
func hasValue(doc any, path, value string) bool {
	vals := lookup(doc, path)
	if value == "" {
		return len(vals) > 0
	}
	var want any
	_ = json.Unmarshal([]byte(value), &want)
	for _, v := range vals {
		if reflect.DeepEqual(v, want) {
			return true
		}
	}
	return false
}

// tableCase is how one row is exercised: body is the request (without
// stream); mark is a text of the request that a hint must not carry to the
// upstream; up, for an answer row, scripts the upstream's stream per
// column.
type tableCase struct {
	body string
	mark string
	up   map[string]string
}

func chatCase(extra string) tableCase {
	return tableCase{body: `{"model":"m","messages":[{"role":"user","content":"Say hello"}]` + extra + `}`}
}

func msgCase(extra string) tableCase {
	return tableCase{body: `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Say hello"}]` + extra + `}`}
}

func rsCase(extra string) tableCase {
	return tableCase{body: `{"model":"m","input":"Say hello"` + extra + `}`}
}

func hinted(c tableCase, mark string) tableCase {
	c.mark = mark
	return c
}

func answered(c tableCase, openai, anthropic, responses string) tableCase {
	c.up = map[string]string{"openai": openai, "anthropic": anthropic, "openai-responses": responses}
	return c
}

const (
	chatToolHistory = `,"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`
	chatTool        = `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	msgTool         = `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`
	rsTool          = `,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]`
)

// Scripted upstream answers, per protocol.
var (
	oaiToolAnswer = oaiStream(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`, `"tool_calls"`, "")
	antToolAnswer = antStream(`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}`, `{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}`, "tool_use", "null")
	oaiLength     = oaiStream(`{"content":"Hello"}`, `"length"`, "")
	antLength     = antStream(`{"type":"text","text":""}`, `{"type":"text_delta","text":"Hello"}`, "max_tokens", "null")
	oaiStopSeq    = oaiStream(`{"content":"Hello"}`, `"stop","stop_reason":"END"`, "")
	antStopSeq    = antStream(`{"type":"text","text":""}`, `{"type":"text_delta","text":"Hello"}`, "stop_sequence", `"END"`)
	oaiThinking   = oaiStream(`{"reasoning_content":"Let me think."},"finish_reason":null}]}`+"\n\n"+`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-1","choices":[{"index":0,"delta":{"content":"Hello"}`, `"stop"`, "")
	antThinking   = antStream(`{"type":"thinking","thinking":"","signature":""}`, `{"type":"thinking_delta","thinking":"Let me think."}`, "end_turn", "null")
	antJSONOutput = antStream(`{"type":"tool_use","id":"toolu_1","name":"answer","input":{}}`, `{"type":"input_json_delta","partial_json":"{\"a\":1}"}`, "tool_use", "null")
	oaiUsage      = oaiStream(`{"content":"Hello"}`, `"stop"`, `{"prompt_tokens":9112,"completion_tokens":40,"total_tokens":9152,"prompt_tokens_details":{"cached_tokens":9000,"cache_write_tokens":100},"completion_tokens_details":{"reasoning_tokens":7}}`)
	antUsage      = antStream(`{"type":"text","text":""}`, `{"type":"text_delta","text":"Hello"}`, "end_turn", "null")
	rsToolAnswer  = rsStream(rsCall(""), `"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"city\":\"Paris\"}"`, rsCall(`{\"city\":\"Paris\"}`), "completed")
	rsLength      = rsStream(rsMessage(""), rsTextDelta("Hello"), rsMessage("Hello"), "incomplete")
	rsThinking    = rsStream(`{"id":"rs_1","type":"reasoning","summary":[]}`, `"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Let me think."`,
		`{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Let me think."}]}`, "completed")
	rsJSONOutput = rsStream(rsMessage(""), rsTextDelta(`{"a":1}`), rsMessage(`{"a":1}`), "completed")
	rsUsage      = rsStream(rsMessage(""), rsTextDelta("Hello"), rsMessage("Hello"), "completed")
)

// rsStream is a Responses stream of one output item: as added, one delta
// event (its type as a JSON string, a comma, its other fields), the item
// done; then response.completed or, for end "incomplete",
// response.incomplete for max_output_tokens, with usage of cached and
// reasoning tokens.
func rsStream(added, delta, done, end string) string {
	seq := 0
	ev := func(typ, fields string) string {
		seq++
		return fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq-1, fields)
	}
	response := func(status, output, usage string) string {
		details := "null"
		if status == "incomplete" {
			details = `{"reason":"max_output_tokens"}`
		}
		return `"response":{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","incomplete_details":` + details +
			`,"model":"up-rs","output":` + output + `,"usage":` + usage + `}`
	}
	deltaType, deltaFields, _ := strings.Cut(strings.TrimPrefix(delta, `"`), `",`)
	return ev("response.created", response("in_progress", "[]", "null")) +
		ev("response.output_item.added", `"output_index":0,"item":`+added) +
		ev(deltaType, deltaFields) +
		ev("response.output_item.done", `"output_index":0,"item":`+done) +
		ev("response."+end, response(end, "["+done+"]",
			`{"input_tokens":9112,"input_tokens_details":{"cached_tokens":9000},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":9152}`))
}

// rsMessage is a Responses message item of text ("" for one just added).
func rsMessage(text string) string {
	if text == "" {
		return `{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}`
	}
	q, _ := json.Marshal(text)
	return `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":` + string(q) + `}]}`
}

// rsTextDelta is the output_text.delta event (type and fields) of msg_1.
func rsTextDelta(text string) string {
	q, _ := json.Marshal(text)
	return `"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":` + string(q)
}

// rsCall is a Responses function_call item of get_weather with args (JSON
// text inside a JSON string; "" for one just added).
func rsCall(args string) string {
	status := "completed"
	if args == "" {
		status = "in_progress"
	}
	return `{"id":"fc_1","type":"function_call","status":"` + status + `","call_id":"call_1","name":"get_weather","arguments":"` + args + `"}`
}

// oaiStream is a Chat Completions stream of one delta, then the finish
// (its JSON text, which may carry more fields of the choice), then usage.
func oaiStream(delta, finish, usage string) string {
	if usage == "" {
		usage = `{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}`
	}
	head := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-1","choices":[`
	return head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		head + `{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n" +
		head + `{"index":0,"delta":{},"finish_reason":` + finish + `}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-1","choices":[],"usage":` + usage + "}\n\n" +
		"data: [DONE]\n\n"
}

// antStream is a Messages stream of one content block (its start and one
// delta) with cache usage, and the stop reason and sequence (JSON).
func antStream(block, delta, stop, seq string) string {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	return ev("message_start", `{"type":"message_start","message":{"id":"msg_up1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":9000,"output_tokens":1}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+block+`}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+delta+`}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":`+seq+`},"usage":{"output_tokens":40}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
}

// tableCases are the rows' cases, by "<api>/<row>".
var tableCases = map[string]tableCase{
	// Chat Completions.
	"chat/max_completion_tokens":           chatCase(`,"max_completion_tokens":50`),
	"chat/max_tokens":                      chatCase(`,"max_tokens":50`),
	"chat/messages[] system":               {body: `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`},
	"chat/messages[] system, two":          {body: `{"model":"m","messages":[{"role":"system","content":"a"},{"role":"system","content":"b"},{"role":"user","content":"hi"}]}`},
	"chat/messages[] user image_url":       {body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`},
	"chat/messages[] assistant tool_calls": {body: `{"model":"m"` + chatToolHistory + chatTool + `}`},
	"chat/messages[] tool":                 {body: `{"model":"m"` + chatToolHistory + chatTool + `}`},
	"chat/stop":                            chatCase(`,"stop":"END"`),
	"chat/temperature":                     chatCase(`,"temperature":0.5`),
	"chat/top_p":                           chatCase(`,"top_p":0.9`),
	"chat/tools":                           chatCase(chatTool),
	"chat/tool_choice required":            chatCase(chatTool + `,"tool_choice":"required"`),
	"chat/tool_choice function":            chatCase(chatTool + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`),
	"chat/parallel_tool_calls false":       chatCase(chatTool + `,"parallel_tool_calls":false`),
	"chat/user":                            chatCase(`,"user":"u1"`),
	"chat/reasoning_effort":                chatCase(`,"reasoning_effort":"medium","max_completion_tokens":8000`),
	"chat/response_format json_schema":     chatCase(`,"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"}}}`),
	"chat/response_format json_object":     chatCase(`,"response_format":{"type":"json_object"}`),
	"chat/seed":                            hinted(chatCase(`,"seed":424242`), "424242"),
	"chat/presence_penalty":                hinted(chatCase(`,"presence_penalty":0.25`), "presence_penalty"),
	"chat/frequency_penalty":               hinted(chatCase(`,"frequency_penalty":0.25`), "frequency_penalty"),
	"chat/service_tier":                    hinted(chatCase(`,"service_tier":"default"`), "default"),
	"chat/store":                           hinted(chatCase(`,"store":true`), `"store":true`),
	"chat/metadata":                        hinted(chatCase(`,"metadata":{"k":"meta-mark"}`), "meta-mark"),
	"chat/prediction":                      hinted(chatCase(`,"prediction":{"type":"content","content":"pred-mark"}`), "pred-mark"),
	"chat/prompt_cache_key":                hinted(chatCase(`,"prompt_cache_key":"pck-mark"`), "pck-mark"),
	"chat/safety_identifier":               hinted(chatCase(`,"safety_identifier":"sid-mark"`), "sid-mark"),
	"chat/verbosity":                       hinted(chatCase(`,"verbosity":"low"`), "verbosity"),
	"chat/web_search_options":              hinted(chatCase(`,"web_search_options":{}`), "web_search"),
	"chat/n above 1":                       chatCase(`,"n":2`),
	"chat/logprobs":                        chatCase(`,"logprobs":true`),
	"chat/top_logprobs":                    chatCase(`,"logprobs":false,"top_logprobs":2`),
	"chat/logit_bias":                      chatCase(`,"logit_bias":{"50256":-100}`),
	"chat/audio":                           chatCase(`,"audio":{"voice":"alloy","format":"wav"}`),
	"chat/functions":                       chatCase(`,"functions":[{"name":"f","parameters":{"type":"object"}}]`),
	"chat/answer: tool call":               answered(chatCase(chatTool), oaiToolAnswer, antToolAnswer, rsToolAnswer),
	"chat/answer: stop reason tool_use":    answered(chatCase(chatTool), oaiToolAnswer, antToolAnswer, rsToolAnswer),
	"chat/answer: stop reason max_tokens":  answered(chatCase(""), oaiLength, antLength, rsLength),
	"chat/answer: stop sequence":           answered(chatCase(`,"stop":["END"]`), oaiStopSeq, antStopSeq, ""),
	"chat/answer: thinking":                answered(chatCase(`,"reasoning_effort":"low"`), oaiThinking, antThinking, rsThinking),
	"chat/answer: JSON output tool":        answered(chatCase(`,"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"}}}`), oaiUsage, antJSONOutput, rsJSONOutput),
	"chat/answer: cache read tokens":       answered(chatCase(""), oaiUsage, antUsage, rsUsage),
	"chat/answer: cache write tokens":      answered(chatCase(""), oaiUsage, antUsage, rsUsage),
	"chat/answer: prompt tokens":           answered(chatCase(""), oaiUsage, antUsage, rsUsage),
	"chat/answer: reasoning tokens":        answered(chatCase(""), oaiUsage, antUsage, rsUsage),

	// Messages.
	"messages/max_tokens":                            msgCase(""),
	"messages/system":                                msgCase(`,"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}]`),
	"messages/messages[] system":                     {body: `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"},{"role":"system","content":"Be brief."}]}`},
	"messages/messages[] image":                      {body: `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}`},
	"messages/messages[] tool_use":                   {body: `{"model":"m","max_tokens":50` + msgTool + `,"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}]}`},
	"messages/messages[] tool_result":                {body: `{"model":"m","max_tokens":50` + msgTool + `,"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}]}`},
	"messages/messages[] thinking":                   {body: `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"think-mark","signature":"sig"},{"type":"text","text":"Hello"}]},{"role":"user","content":"again"}]}`, mark: "think-mark"},
	"messages/messages[] redacted_thinking":          {body: `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"redacted_thinking","data":"redacted-mark"},{"type":"text","text":"Hello"}]},{"role":"user","content":"again"}]}`, mark: "redacted-mark"},
	"messages/messages[] document":                   {body: `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}`},
	"messages/stop_sequences":                        msgCase(`,"stop_sequences":["END"]`),
	"messages/temperature":                           msgCase(`,"temperature":0.5`),
	"messages/top_p":                                 msgCase(`,"top_p":0.9`),
	"messages/top_k":                                 hinted(msgCase(`,"top_k":5`), "top_k"),
	"messages/thinking enabled":                      msgCase(`,"thinking":{"type":"enabled","budget_tokens":8000}`),
	"messages/thinking adaptive":                     msgCase(`,"thinking":{"type":"adaptive"}`),
	"messages/output_config.effort":                  msgCase(`,"output_config":{"effort":"high"}`),
	"messages/output_config.format":                  msgCase(`,"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}`),
	"messages/tools":                                 msgCase(msgTool),
	"messages/tools[] strict":                        msgCase(`,"tools":[{"name":"get_weather","input_schema":{"type":"object"},"strict":true}]`),
	"messages/tools[] server tool":                   hinted(msgCase(`,"tools":[{"type":"web_search_20250305","name":"web_search"}]`), "web_search"),
	"messages/tools[] defer_loading":                 hinted(msgCase(`,"tools":[{"name":"get_weather","input_schema":{"type":"object"},"defer_loading":true}]`), "defer_loading"),
	"messages/tool_choice any":                       msgCase(msgTool + `,"tool_choice":{"type":"any"}`),
	"messages/tool_choice tool":                      msgCase(msgTool + `,"tool_choice":{"type":"tool","name":"get_weather"}`),
	"messages/tool_choice disable_parallel_tool_use": msgCase(msgTool + `,"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`),
	"messages/metadata.user_id":                      msgCase(`,"metadata":{"user_id":"u1"}`),
	"messages/cache_control":                         hinted(msgCase(`,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`), "cache_control"),
	"messages/citations":                             hinted(msgCase(`,"system":[{"type":"text","text":"a","citations":[{"type":"char_location","cited_text":"cite-mark"}]}]`), "cite-mark"),
	"messages/context_management":                    hinted(msgCase(`,"context_management":{"edits":[]}`), "context_management"),
	"messages/service_tier":                          hinted(msgCase(`,"service_tier":"standard_only"`), "standard_only"),
	"messages/container":                             hinted(msgCase(`,"container":"container-mark"`), "container-mark"),
	"messages/mcp_servers":                           hinted(msgCase(`,"mcp_servers":[{"type":"url","url":"https://example.com/mcp","name":"mcp-mark"}]`), "mcp-mark"),
	"messages/answer: tool call":                     answered(msgCase(msgTool), oaiToolAnswer, antToolAnswer, rsToolAnswer),
	"messages/answer: stop reason tool_use":          answered(msgCase(msgTool), oaiToolAnswer, antToolAnswer, rsToolAnswer),
	"messages/answer: stop reason max_tokens":        answered(msgCase(""), oaiLength, antLength, rsLength),
	"messages/answer: stop sequence":                 answered(msgCase(`,"stop_sequences":["END"]`), oaiStopSeq, antStopSeq, ""),
	"messages/answer: thinking":                      answered(msgCase(`,"thinking":{"type":"enabled","budget_tokens":1024}`), oaiThinking, antThinking, rsThinking),
	"messages/answer: cache read tokens":             answered(msgCase(""), oaiUsage, antUsage, rsUsage),
	"messages/answer: cache write tokens":            answered(msgCase(""), oaiUsage, antUsage, rsUsage),
	"messages/answer: input tokens":                  answered(msgCase(""), oaiUsage, antUsage, rsUsage),

	// Responses.
	"responses/input string":                   rsCase(""),
	"responses/instructions":                   rsCase(`,"instructions":"Be brief."`),
	"responses/input[] developer message":      {body: `{"model":"m","input":[{"role":"developer","content":"Be brief."},{"role":"user","content":"hi"}]}`},
	"responses/input[] input_image":            {body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`},
	"responses/input[] function_call":          {body: rsToolHistory},
	"responses/input[] function_call_output":   {body: rsToolHistory},
	"responses/input[] reasoning":              {body: `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"enc-mark"},{"role":"user","content":"hi"}]}`, mark: "enc-mark"},
	"responses/input[] input_file":             {body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]}`},
	"responses/max_output_tokens":              rsCase(`,"max_output_tokens":50`),
	"responses/temperature":                    rsCase(`,"temperature":0.5`),
	"responses/top_p":                          rsCase(`,"top_p":0.9`),
	"responses/reasoning.effort":               rsCase(`,"reasoning":{"effort":"low"}`),
	"responses/reasoning.summary":              hinted(rsCase(`,"reasoning":{"summary":"detailed"}`), "detailed"),
	"responses/tools function":                 rsCase(rsTool),
	"responses/tools namespace":                rsCase(rsNamespace),
	"responses/tools namespace grouping":       hinted(rsCase(rsNamespace), "multi_agent_v1"),
	"responses/tools web_search":               hinted(rsCase(`,"tools":[{"type":"web_search","external_web_access":false}]`), "web_search"),
	"responses/tools custom":                   rsCase(`,"tools":[{"type":"custom","name":"apply_patch"}]`),
	"responses/tool_choice required":           rsCase(rsTool + `,"tool_choice":"required"`),
	"responses/tool_choice function":           rsCase(rsTool + `,"tool_choice":{"type":"function","name":"get_weather"}`),
	"responses/parallel_tool_calls false":      rsCase(rsTool + `,"parallel_tool_calls":false`),
	"responses/text.format json_schema":        rsCase(`,"text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"}}}`),
	"responses/text.format json_object":        rsCase(`,"text":{"format":{"type":"json_object"}}`),
	"responses/text.verbosity":                 hinted(rsCase(`,"text":{"verbosity":"low"}`), "verbosity"),
	"responses/safety_identifier":              rsCase(`,"safety_identifier":"u1"`),
	"responses/include":                        hinted(rsCase(`,"include":["reasoning.encrypted_content"]`), "encrypted_content"),
	"responses/prompt_cache_key":               hinted(rsCase(`,"prompt_cache_key":"pck-mark"`), "pck-mark"),
	"responses/prompt_cache_retention":         hinted(rsCase(`,"prompt_cache_retention":"24h"`), "24h"),
	"responses/client_metadata":                hinted(rsCase(`,"client_metadata":{"k":"cm-mark"}`), "cm-mark"),
	"responses/truncation":                     hinted(rsCase(`,"truncation":"auto"`), "truncation"),
	"responses/service_tier":                   hinted(rsCase(`,"service_tier":"default"`), "default"),
	"responses/max_tool_calls":                 hinted(rsCase(`,"max_tool_calls":3`), "max_tool_calls"),
	"responses/background true":                rsCase(`,"background":true`),
	"responses/conversation":                   rsCase(`,"conversation":"conv_1"`),
	"responses/prompt":                         rsCase(`,"prompt":{"id":"pmpt_1"}`),
	"responses/top_logprobs":                   rsCase(`,"top_logprobs":2`),
	"responses/answer: tool call":              answered(rsCase(rsTool), oaiToolAnswer, antToolAnswer, rsToolAnswer),
	"responses/answer: stop reason tool_use":   answered(rsCase(rsTool), oaiToolAnswer, antToolAnswer, rsToolAnswer),
	"responses/answer: stop reason max_tokens": answered(rsCase(""), oaiLength, antLength, rsLength),
	"responses/answer: thinking":               answered(rsCase(`,"reasoning":{"effort":"low"}`), oaiThinking, antThinking, rsThinking),
	"responses/answer: cache read tokens":      answered(rsCase(""), oaiUsage, antUsage, rsUsage),
	"responses/answer: input tokens":           answered(rsCase(""), oaiUsage, antUsage, rsUsage),
	"responses/answer: reasoning tokens":       answered(rsCase(""), oaiUsage, antUsage, rsUsage),
}

const (
	rsToolHistory = `{"model":"m"` + rsTool + `,"input":[{"role":"user","content":"weather?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"sunny"}]}`
	rsNamespace   = `,"tools":[{"type":"namespace","name":"multi_agent_v1","description":"Agents.","tools":[{"type":"function","name":"close_agent","parameters":{"type":"object"}}]}]`
)

// tablePaths are the client APIs' paths and headers.
var tablePaths = map[string]struct {
	path string
	hdr  []string
}{
	"chat":      {"/api/v1/chat/completions", nil},
	"messages":  {"/api/v1/messages", []string{"Authorization", "", "X-Api-Key", testKey, "Anthropic-Version", "2023-06-01"}},
	"responses": {"/api/v1/responses", nil},
}

// TestTranslationTable runs every cell of docs/translation.md's tables
// through its pair (see the doc's "The tables").
func TestTranslationTable(t *testing.T) {
	cells := readTranslationTable(t)
	rows := map[string]bool{}
	for _, c := range cells {
		key := c.api + "/" + c.row
		rows[key] = true
		tc, ok := tableCases[key]
		if !ok {
			t.Errorf("row %q of the %s table has no test case", c.row, c.api)
		}
		if _, ok := tableUpstreams[c.upstream]; !ok {
			t.Errorf("the %s table has a column %q of no upstream", c.api, c.upstream)
		}
		if ok && tc.up != nil && (c.kind == "translated" || c.kind == "absent") && tc.up[c.upstream] == "" {
			t.Errorf("row %q of the %s table has no scripted answer for %s", c.row, c.api, c.upstream)
		}
	}
	for key := range tableCases {
		if !rows[key] {
			t.Errorf("test case %q has no row in %s", key, translationDoc)
		}
	}
	// An absent cell says which field the answer lacks: another column of
	// its row translates that very path, so that a misspelt path (which
	// nothing has) cannot pass.
	for _, c := range cells {
		if c.kind == "absent" && !slices.ContainsFunc(cells, func(o tableCell) bool {
			return o.api == c.api && o.row == c.row && o.kind == "translated" && o.path == c.path
		}) {
			t.Errorf("row %q of the %s table: %s is absent for %s, but no cell of the row translates it", c.row, c.api, c.path, c.upstream)
		}
	}
	// Every field the openai-responses adapter drops is a hint the table
	// checks the answer names.
	for _, f := range responses.DroppedFields {
		if !slices.ContainsFunc(cells, func(c tableCell) bool { return c.upstream == "openai-responses" && c.kind == "hint" && c.path == f }) {
			t.Errorf("the openai-responses adapter drops %s, which no openai-responses cell names as a hint", f)
		}
	}
	if t.Failed() {
		return
	}
	for _, c := range cells {
		tc := tableCases[c.api+"/"+c.row]
		if c.kind == "native" && tc.up != nil {
			continue // an answer passed through: the provider's own events (TestClaudeCodePassesThrough)
		}
		t.Run(c.api+"/"+c.row+"/"+c.upstream, func(t *testing.T) {
			if c.kind == "native" {
				runNativeCell(t, c, tc)
				return
			}
			if tc.up != nil && c.kind != "refused" {
				runAnswerCell(t, c, tc)
				return
			}
			runRequestCell(t, c, tc)
		})
	}
}

// tableUpstreams are the tables' columns: each upstream's provider name in
// tableGateway.
var tableUpstreams = map[string]string{"openai": "p1", "anthropic": "claude", "openai-responses": "rs"}

// tableGateway is a gateway whose model "m" has a route to a fake of each
// upstream protocol, the column's first; up is that fake, all are the
// three.
func tableGateway(t *testing.T, upstream string) (url string, up *providertest.Server, all []*providertest.Server) {
	t.Helper()
	fakes := map[string]*providertest.Server{
		"openai": providertest.New(t), "anthropic": providertest.NewAnthropic(t), "openai-responses": providertest.NewResponses(t),
	}
	models := map[string]string{"openai": "up-1", "anthropic": "claude-x", "openai-responses": "up-rs"}
	routes := ""
	for _, u := range append([]string{upstream}, slices.DeleteFunc([]string{"openai", "anthropic", "openai-responses"}, func(s string) bool { return s == upstream })...) {
		// web_search priced: a row declaring it passes through on its own protocol.
		routes += fmt.Sprintf("      - {provider: %s, model: %s, input_price: 1, output_price: 2, tool_prices: {web_search: 0.01}}\n", tableUpstreams[u], models[u])
		all = append(all, fakes[u])
	}
	cfg, err := catalog.Parse(fmt.Appendf(nil, `providers:
  - {name: claude, api: anthropic, base_url: %q, api_key_env: CLAUDE_KEY}
  - {name: p1, api: openai, base_url: %q}
  - {name: rs, api: openai-responses, base_url: %q}
models:
  - id: m
    routes:
%sprojects:
  - id: proj
    keys: [{key: %s}]
`, fakes["anthropic"].URL(), fakes["openai"].URL(), fakes["openai-responses"].URL(), routes, testKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.FromConfig(cfg, app.Options{Getenv: func(k string) string {
		if k == "CLAUDE_KEY" {
			return "claude-secret"
		}
		return ""
	}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL, fakes[upstream], all
}

// onlyRoute pins a request to the upstream of the column: a request
// without a form for another protocol is then refused rather than served
// by another route.
func onlyRoute(body, upstream string) string {
	return strings.TrimSuffix(body, "}") + `,"provider":{"only":["` + tableUpstreams[upstream] + `"]}}`
}

// runNativeCell checks a request row's cell of a pair of one protocol: the
// upstream gets the client's body member for member, but for the route's
// model, stream (and, on Chat Completions, stream_options).
func runNativeCell(t *testing.T, c tableCell, tc tableCase) {
	url, up, _ := tableGateway(t, c.upstream)
	p := tablePaths[c.api]
	a := callPath(t, url+p.path, onlyRoute(tc.body, c.upstream), p.hdr...)
	if a.status != 200 || up.Calls() != 1 {
		t.Fatalf("status %d, %d calls to %s: %s", a.status, up.Calls(), c.upstream, a.body)
	}
	got := up.Requests()[0]
	model, _ := json.Marshal(got.JSON["model"])
	except := map[string]string{"model": string(model), "stream": "true"}
	if c.api == "chat" {
		// Chat Completions also asks for the stream's usage.
		opts, _ := json.Marshal(got.JSON["stream_options"])
		if !strings.Contains(string(opts), `"include_usage":true`) {
			t.Errorf("stream_options %s lacks include_usage", opts)
		}
		except["stream_options"] = string(opts)
	}
	sameMembers(t, got.Body, []byte(tc.body), except)
}

// runRequestCell checks what reaches the upstream, for a request that
// asks for a whole answer and for one that streams.
func runRequestCell(t *testing.T, c tableCell, tc tableCase) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			body := tc.body
			if stream {
				body = strings.TrimSuffix(body, "}") + `,"stream":true}`
			}
			runRequest(t, c, tc, body)
		})
	}
}

func runRequest(t *testing.T, c tableCell, tc tableCase, body string) {
	url, up, all := tableGateway(t, c.upstream)
	p := tablePaths[c.api]
	a := callPath(t, url+p.path, onlyRoute(body, c.upstream), p.hdr...)
	calls := 0
	for _, u := range all {
		calls += u.Calls()
	}
	if c.kind == "refused" {
		if a.status != 400 || !(strings.Contains(a.body, `"param":"`+c.path+`"`) || strings.Contains(a.body, c.path+": ")) {
			t.Errorf("status %d, body %s; want 400 naming %s", a.status, a.body, c.path)
		}
		if calls != 0 {
			t.Errorf("%d upstream calls, want 0", calls)
		}
		return
	}
	if a.status != 200 || up.Calls() != 1 || calls != 1 {
		t.Fatalf("status %d, %d calls to %s, %d in all: %s", a.status, up.Calls(), c.upstream, calls, a.body)
	}
	got := up.Requests()[0]
	dropped := droppedNames(a)
	switch c.kind {
	case "translated":
		if !hasValue(got.JSON, c.path, c.value) {
			t.Errorf("upstream request has not %s = %s:\n%s", c.path, c.value, got.Body)
		}
	case "absent":
		if hasValue(got.JSON, c.path, "") {
			t.Errorf("upstream request has %s:\n%s", c.path, got.Body)
		}
	case "hint":
		if !slices.Contains(dropped, c.path) {
			t.Errorf("x-gateway-dropped %q does not name %s", a.header.Get("X-Gateway-Dropped"), c.path)
		}
		if tc.mark == "" || strings.Contains(string(got.Body), tc.mark) {
			t.Errorf("upstream request carries the hint (%q):\n%s", tc.mark, got.Body)
		}
	}
}

// runAnswerCell scripts the upstream's answer and checks the client's,
// whole and streamed.
func runAnswerCell(t *testing.T, c tableCell, tc tableCase) {
	if c.kind != "translated" && c.kind != "absent" {
		t.Fatalf("an answer row's cell is translated, absent or refused, not %s", c.kind)
	}
	for _, stream := range []bool{false, true} {
		url, up, _ := tableGateway(t, c.upstream)
		up.Script(providertest.Response{Body: tc.up[c.upstream], Header: map[string]string{"Content-Type": "text/event-stream"}})
		p := tablePaths[c.api]
		body := tc.body
		if stream {
			body = strings.TrimSuffix(body, "}") + `,"stream":true`
			if c.api == "chat" {
				body += `,"stream_options":{"include_usage":true}`
			}
			body += "}"
		}
		a := callPath(t, url+p.path, onlyRoute(body, c.upstream), p.hdr...)
		if a.status != 200 || up.Calls() != 1 {
			t.Fatalf("stream %v: status %d, %d calls to %s: %s", stream, a.status, up.Calls(), c.upstream, a.body)
		}
		if !stream {
			var doc any
			if err := json.Unmarshal([]byte(a.body), &doc); err != nil {
				t.Fatalf("answer is not JSON: %v: %s", err, a.body)
			}
			switch {
			case c.kind == "absent" && hasValue(doc, c.path, ""):
				t.Errorf("answer has %s:\n%s", c.path, a.body)
			case c.kind == "translated" && !hasValue(doc, c.path, c.value):
				t.Errorf("answer has not %s = %s:\n%s", c.path, c.value, a.body)
			}
			continue
		}
		if c.stream != "" && !strings.Contains(a.body, c.stream) {
			t.Errorf("stream lacks %s:\n%s", c.stream, a.body)
		}
		if key := c.path[strings.LastIndexAny(c.path, ".]")+1:]; c.kind == "absent" && strings.Contains(a.body, `"`+key+`":`) {
			t.Errorf("stream has %q:\n%s", key, a.body)
		}
	}
}
