// Package benchbody builds Chat Completions request bodies of a chosen size
// shaped as a coding agent sends them, for the benchmarks of large bodies
// (internal/systemtest's BenchmarkBodySize, tools/loadbench's -sizes, the
// wire packages' translation benchmarks): a system prompt, tool
// definitions, and a long conversation of user and assistant turns with
// tool calls and tool results, whose text has escapes (newlines, tabs,
// quotes, backslashes, \u00XX for other control characters) and non-ASCII
// characters, as source code and prose do, written as JSON.stringify
// writes them. The body is the same for the same arguments.
package benchbody

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Chat returns a Chat Completions body naming model whose length is exactly
// size bytes, or the smallest body this package builds (about 2 KB) when
// size is below that. extra, when not empty, is inserted as further
// top-level members (such as `"max_tokens":128`, without braces).
func Chat(model string, size int, extra string) []byte {
	rng := rand.New(rand.NewPCG(uint64(size), 7))
	head := fmt.Sprintf(`{"model":%s,`, quote(model))
	if extra != "" {
		head += extra + ","
	}
	head += `"tools":` + tools + `,"messages":[` + `{"role":"system","content":` + quote(systemPrompt) + `}`
	var b strings.Builder
	b.WriteString(head)
	// The last message is a user turn padded to the exact size; the turns
	// before it are added while they leave room for it.
	const tail = `,{"role":"user","content":""}]}`
	for turn := 0; ; turn++ {
		t := nextTurn(rng, turn)
		if b.Len()+len(t)+len(tail) > size {
			break
		}
		b.WriteString(t)
	}
	pad := max(size-b.Len()-len(tail), 0)
	b.WriteString(`,{"role":"user","content":"`)
	b.WriteString(padding(rng, pad))
	b.WriteString(`"}]}`)
	return []byte(b.String())
}

// quote writes s as JSON.stringify does (the agents' clients are mostly
// JavaScript, TypeScript and Rust): \", \\, \n, \t and the like, \u00XX
// for the other control characters, and <, >, & and non-ASCII as they are.
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

const systemPrompt = "You are a coding agent working in the user's repository.\n" +
	"Use the tools to read and change files; explain what you change and why.\n" +
	"Rules:\n\t- keep changes small\n\t- run the tests (\"make test\") before you say you are done\n" +
	"\t- never print secrets such as C:\\Users\\me\\.aws\\credentials"

// tools are the tool definitions, as an agent sends them with every turn.
const tools = `[{"type":"function","function":{"name":"read_file","description":"Read a file of the repository and return its text, with line numbers.","parameters":{"type":"object","properties":{"path":{"type":"string","description":"The file's path, relative to the repository's root, e.g. \"pkg/llm/request.go\"."},"offset":{"type":"integer","description":"First line, 1-based."},"limit":{"type":"integer","description":"At most this many lines."}},"required":["path"],"additionalProperties":false}}},` +
	`{"type":"function","function":{"name":"edit_file","description":"Replace one exact occurrence of old_text with new_text in a file.","parameters":{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string","description":"Text to replace; must occur exactly once."},"new_text":{"type":"string"}},"required":["path","old_text","new_text"],"additionalProperties":false}}},` +
	`{"type":"function","function":{"name":"run_command","description":"Run a shell command in the repository and return its output (stdout and stderr, at most 30,000 characters) and exit code.","parameters":{"type":"object","properties":{"command":{"type":"string"},"timeout_seconds":{"type":"number","minimum":1,"maximum":600}},"required":["command"]}}},` +
	`{"type":"function","function":{"name":"search","description":"Search the repository for a regular expression; returns matching lines as path:line:text.","parameters":{"type":"object","properties":{"pattern":{"type":"string"},"glob":{"type":"string","description":"Only files matching this glob, e.g. \"*.go\"."}},"required":["pattern"]}}}]`

// Fragments of the conversation's text: prose in several scripts and code
// with the characters JSON escapes.
var (
	prose = []string{
		"The handler reads the whole body before it checks anything, so a slow client holds a connection but never a slot.",
		"Let me look at how the request is decoded first; the error names the field that is wrong.",
		"Ce changement garde le comportement identique : les mêmes octets partent vers le fournisseur, déjà validés.",
		"Die Prüfung läuft vor der Abrechnung, damit eine abgelehnte Anfrage nichts kostet — auch nicht bei Wiederholung.",
		"この関数はリクエストの本文を一度だけ読み、検証してから上流へ送ります。",
		"Тест проверяет статус, заголовки и тело ответа, а не время выполнения.",
		"I ran the tests: 42 passed, 0 failed ✅. The benchmark moved from 9.4 ms to 1.1 ms 🚀 at 1 MB.",
		"Note the path C:\\build\\out and the quote \"as sent\"; both need escaping in JSON.",
	}
	code = []string{
		"func (r *ChatRequest) Size() int { return r.size }\n",
		"\tif err := json.Unmarshal(body, &fields); err != nil {\n\t\treturn nil, invalid(\"\", \"request body is not valid JSON: %s\", jsonProblem(err))\n\t}\n",
		"\tfor i := 0; i < len(b); i++ {\n\t\tif b[i] == '\\\\' || b[i] == '\"' {\n\t\t\tn++\n\t\t}\n\t}\n",
		"// Ünïcödé in a comment, and a tab\there.\n",
		"\tfmt.Printf(\"%q\\n\", \"line\\tbreak\")\n",
		"const greeting = \"héllo, wörld — 你好\"\n",
		"\tif a < b && c > d {\n\t\treturn <-done\n\t}\n",
		"\x1b[31mred\x1b[0m and a form feed \f in captured output\r\n",
	}
)

func pick(rng *rand.Rand, from []string, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(from[rng.IntN(len(from))])
		b.WriteByte(' ')
	}
	return b.String()
}

// nextTurn is one exchange, each message with its leading comma: a user
// message, then either an assistant answer, or an assistant tool call and
// the tool's result.
func nextTurn(rng *rand.Rand, turn int) string {
	user := pick(rng, prose, 2+rng.IntN(4)) + "\n\n```go\n" + pick(rng, code, 3+rng.IntN(6)) + "```"
	s := `,{"role":"user","content":` + quote(user) + `}`
	if turn%2 == 0 {
		answer := pick(rng, prose, 3+rng.IntN(5)) + "\n" + pick(rng, code, 2+rng.IntN(4))
		return s + `,{"role":"assistant","content":` + quote(answer) + `}`
	}
	id := fmt.Sprintf("call_%04d", turn)
	args := quote(fmt.Sprintf(`{"path":"pkg/llm/file_%d.go","offset":%d,"limit":200}`, turn, 1+rng.IntN(400)))
	result := pick(rng, code, 8+rng.IntN(16))
	return s + `,{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"read_file","arguments":` + args + `}}]}` +
		`,{"role":"tool","tool_call_id":"` + id + `","content":` + quote(result) + `}`
}

// padding is n bytes of ASCII text for the last message.
func padding(rng *rand.Rand, n int) string {
	const words = "please continue with the next step and run the tests again "
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(8):])
	}
	return b.String()[:n]
}
