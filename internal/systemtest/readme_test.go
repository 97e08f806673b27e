//go:build integration

package systemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
)

// fence is one fenced block of a Markdown file: its language and text.
type fence struct {
	lang, text string
}

// fences returns the fenced blocks of a Markdown file, in order.
func fences(t *testing.T, path string) []fence {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fence
	var cur *fence
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &fence{lang: strings.TrimPrefix(trimmed, "```")}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// curlCall is what one curl command of the README sends.
type curlCall struct {
	method, url, body string
	header            http.Header
}

// shellWords splits a line as sh would for the README's commands: single
// and double quotes, $NAME inside double quotes or bare (from vars), and a
// pipe ending the command.
func shellWords(line string, vars map[string]string) []string {
	var words []string
	var w strings.Builder
	in := false
	expand := func(s string) string {
		return regexp.MustCompile(`\$[A-Z_]+`).ReplaceAllStringFunc(s, func(v string) string { return vars[v[1:]] })
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			w.WriteString(expand(line[i+1 : i+1+j]))
			i += j + 1
			in = true
		case c == '|':
			if in {
				words = append(words, w.String())
			}
			return words
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case c == '$':
			j := i + 1
			for j < len(line) && (line[j] >= 'A' && line[j] <= 'Z' || line[j] == '_') {
				j++
			}
			w.WriteString(vars[line[i+1:j]])
			i = j - 1
			in = true
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// parseCurl reads the curl command of an sh block (continuation lines
// joined), with the options the README uses.
func parseCurl(t *testing.T, block string, vars map[string]string) curlCall {
	t.Helper()
	joined := strings.ReplaceAll(block, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		words := shellWords(strings.TrimSpace(line), vars)
		i := slices.Index(words, "curl")
		if i < 0 {
			continue
		}
		c := curlCall{method: http.MethodGet, header: http.Header{}}
		for words = words[i+1:]; len(words) > 0; words = words[1:] {
			switch words[0] {
			case "-s":
			case "-D", "-o":
				words = words[1:]
			case "-H":
				name, value, _ := strings.Cut(words[1], ":")
				c.header.Add(name, strings.TrimSpace(value))
				words = words[1:]
			case "-d":
				c.method, c.body = http.MethodPost, words[1]
				words = words[1:]
			default:
				if strings.HasPrefix(words[0], "-") {
					t.Fatalf("curl option %s: not known to this test", words[0])
				}
				c.url = words[0]
			}
		}
		return c
	}
	t.Fatalf("no curl command in %q", block)
	return curlCall{}
}

// do sends c to the gateway at base in place of the README's host.
func (c curlCall) do(t *testing.T, base string) (*http.Response, []byte) {
	t.Helper()
	u := strings.Replace(c.url, "http://127.0.0.1:8080", base, 1)
	if u == c.url {
		t.Fatalf("%s: not on the README's 127.0.0.1:8080", c.url)
	}
	req, err := http.NewRequest(c.method, u, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = c.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// readmeMasked are the members whose values differ from one run to the
// next: an id keeps its prefix (up to its first _ or -), a time its type.
var readmeMasked = map[string]bool{"id": true, "created": true, "created_at": true}

// idPrefix is an id's prefix: chatcmpl-, resp_, msg_, req_.
func idPrefix(s string) string {
	if i := strings.IndexAny(s, "_-"); i >= 0 {
		return s[:i+1]
	}
	return s
}

// shownIn reports where shown, a JSON value the README shows, is not part
// of live, the server's answer: every member shown has the same value
// (masked members the same id prefix or type; a string ending in " ..."
// the same start), every array as many elements; the README may leave
// members out, never add or change one.
func shownIn(path string, shown, live any) []string {
	switch s := shown.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: shown an object, the server answers %v", path, live)}
		}
		var out []string
		for k, sv := range s {
			lv, ok := l[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: shown, not in the server's answer", path, k))
				continue
			}
			if readmeMasked[k] {
				ss, sok := sv.(string)
				ls, lok := lv.(string)
				if sok != lok || sok && idPrefix(ss) != idPrefix(ls) || fmt.Sprintf("%T", sv) != fmt.Sprintf("%T", lv) {
					out = append(out, fmt.Sprintf("%s.%s: shown %v, the server answers %v", path, k, sv, lv))
				}
				continue
			}
			out = append(out, shownIn(path+"."+k, sv, lv)...)
		}
		return out
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(s) {
			return []string{fmt.Sprintf("%s: shown %v, the server answers %v", path, shown, live)}
		}
		var out []string
		for i := range s {
			out = append(out, shownIn(fmt.Sprintf("%s[%d]", path, i), s[i], l[i])...)
		}
		return out
	case string:
		if l, ok := live.(string); ok && strings.HasSuffix(s, " ...") && strings.HasPrefix(l, strings.TrimSuffix(s, "...")) {
			return nil
		}
		if s != live {
			return []string{fmt.Sprintf("%s: shown %q, the server answers %v", path, s, live)}
		}
		return nil
	default:
		if fmt.Sprint(shown) != fmt.Sprint(live) {
			return []string{fmt.Sprintf("%s: shown %v, the server answers %v", path, shown, live)}
		}
		return nil
	}
}

// readmeGateway serves what make run serves: app.New with the
// environment of an unconfigured checkout (the embedded demo config, the
// memory stores), plus the tokenizer's vocabularies when installed.
func readmeGateway(t *testing.T) string {
	t.Helper()
	env := map[string]string{"BUZZGATE_TOKENIZER_DIR": os.Getenv("BUZZGATE_TOKENIZER_DIR")}
	a, err := app.New(context.Background(), app.Options{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestReadmeExamples runs every curl example of README.md against the
// gateway make run starts and checks the answer the README shows after it
// (a json block) is the server's, ids and times aside, and the headers a
// shell comment shows (name: value lines after the command) are the
// server's, in order, request ids aside but equal where the README's are.
func TestReadmeExamples(t *testing.T) {
	base := readmeGateway(t)
	blocks := fences(t, "../../README.md")
	examples := 0
	for i, b := range blocks {
		if b.lang != "sh" || !strings.Contains(b.text, "curl ") {
			continue
		}
		examples++
		vars := map[string]string{"KEY": fmt.Sprintf("readme-%d", i)}
		call := parseCurl(t, b.text, vars)
		name := call.method + " " + strings.TrimPrefix(call.url, "http://127.0.0.1:8080")
		runs := 1
		if m := regexp.MustCompile(`for \w+ in ([0-9 ]+); do`).FindStringSubmatch(b.text); m != nil {
			runs = len(strings.Fields(m[1]))
		}
		var got []string
		var lastBody []byte
		for range runs {
			resp, body := call.do(t, base)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
			}
			lastBody = body
			if m := regexp.MustCompile(`grep -iE '\^\(([\w|-]+)\)'`).FindStringSubmatch(b.text); m != nil {
				want := strings.Split(m[1], "|")
				var names []string
				for k := range resp.Header {
					if slices.ContainsFunc(want, func(w string) bool { return strings.EqualFold(w, k) }) {
						names = append(names, k)
					}
				}
				slices.Sort(names)
				for _, k := range names {
					got = append(got, k+": "+resp.Header.Get(k))
				}
			}
		}
		if got != nil {
			var shown []string
			for _, line := range strings.Split(b.text, "\n") {
				if m := regexp.MustCompile(`^# ([\w-]+: \S+)$`).FindStringSubmatch(strings.TrimSpace(line)); m != nil {
					shown = append(shown, m[1])
				}
			}
			if fmt.Sprint(maskHeaderLines(shown)) != fmt.Sprint(maskHeaderLines(got)) {
				t.Errorf("%s: the README shows\n%s\nthe server answers\n%s", name, strings.Join(shown, "\n"), strings.Join(got, "\n"))
			}
			continue
		}
		if i+1 >= len(blocks) || blocks[i+1].lang != "json" {
			continue
		}
		var shown, live any
		if err := json.Unmarshal([]byte(blocks[i+1].text), &shown); err != nil {
			t.Errorf("%s: the answer the README shows is not JSON: %v\n%s", name, err, blocks[i+1].text)
			continue
		}
		if err := json.Unmarshal(lastBody, &live); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, lastBody)
		}
		diff := shownIn("", shown, live)
		slices.Sort(diff)
		for _, d := range diff {
			t.Errorf("%s: %s", name, d)
		}
		if len(diff) > 0 {
			var pretty bytes.Buffer
			json.Compact(&pretty, lastBody)
			t.Logf("%s: the server answers %s", name, pretty.String())
		}
	}
	if examples < 4 {
		t.Errorf("%d curl examples in README.md, want at least 4", examples)
	}
}

// maskHeaderLines keeps each header line's name and the id prefix of its
// value, and numbers distinct ids in order of appearance, so that two
// lines showing one request id must match two lines of one id.
func maskHeaderLines(lines []string) []string {
	seen := map[string]int{}
	var out []string
	for _, l := range lines {
		name, value, _ := strings.Cut(l, ": ")
		p := idPrefix(value)
		if p != value {
			if _, ok := seen[value]; !ok {
				seen[value] = len(seen)
			}
			value = fmt.Sprintf("%s<%d>", p, seen[value])
		}
		out = append(out, strings.ToLower(name)+": "+value)
	}
	return out
}
