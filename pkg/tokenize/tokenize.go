// Package tokenize counts tokens the way a model's tokenizer does, for the
// answers the gateway bills without the provider's usage: a stream whose
// client left before the provider reported its counts (the gateway stops
// reading an unkeyed request's stream then), or an upstream that never
// reports them.
//
// Counting uses OpenAI's byte-pair encodings, token for token as tiktoken's
// encode_ordinary (bpe.go; github.com/pkoukk/tiktoken-go is the reference
// its tests compare with), with the vocabularies read at run time from a
// directory that holds the tiktoken npm package's encoders/<name>.json
// files: o200k_base for current OpenAI models and every model of another
// family, cl100k_base for gpt-4, gpt-3.5 and the older embeddings.
// Anthropic publishes no tokenizer for Claude; o200k_base is the
// approximation, and an Anthropic upstream reports the prompt's count at
// the start of its stream, so only a cut answer's output is counted. A
// vocabulary is loaded once, on first use (about a quarter of a second and
// 20 MB allocated). Without the directory, or with a file that cannot be
// read, the count falls back to one token per four
// bytes, and Counter says so once in the log.
package tokenize

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// The encodings the gateway counts with.
const (
	O200K  = "o200k_base"
	CL100K = "cl100k_base"
)

// DirEnv names the directory of the vocabularies: BUZZGATE_TOKENIZER_DIR.
// Unset, it is "tokenizer" beside the executable (where the Lambda build
// puts them).
const DirEnv = "BUZZGATE_TOKENIZER_DIR"

// ExactLimit is the most text counted token by token in one call, the
// rest of a longer text counted at the rate of what was; and of the pieces
// that are not a token themselves, which are merged pair by pair, at most
// MergeLimit bytes are merged in one call, the others counted at the rate
// of those merged. A count runs in a request's finishing step, and these
// keep it to milliseconds whatever the text: a piece that is a token costs
// a lookup (ordinary text is counted at over 50 MB a second), and merging
// at most 0.3 to 0.4 ms a KiB, for one long word of random letters
// (BenchmarkCountWorstCase). Ordinary text merges 10 to 20% of its bytes,
// so 160 KiB or more of it is counted token by token.
const (
	ExactLimit = 256 << 10
	MergeLimit = 32 << 10
)

// Counter counts tokens with the vocabularies of one directory. Its
// encodings load on first use; it is safe for concurrent use.
type Counter struct {
	dir  string
	log  *slog.Logger
	encs sync.Map // name -> *encoding
}

type encoding struct {
	once sync.Once
	enc  *encoder
	err  error
}

// New is a Counter reading the vocabularies from dir ("" counts by the
// fallback). log reports a vocabulary that fails to load, once.
func New(dir string, log *slog.Logger) *Counter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Counter{dir: dir, log: log}
}

// DefaultDir is the directory getenv names (DirEnv), else "tokenizer"
// beside the executable when it holds o200k_base, else "".
func DefaultDir(getenv func(string) string) string {
	if d := getenv(DirEnv); d != "" {
		return d
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	d := filepath.Join(filepath.Dir(exe), "tokenizer")
	if _, err := os.Stat(filepath.Join(d, O200K+".json")); err != nil {
		return ""
	}
	return d
}

// EncodingFor is the encoding of a model, by its upstream name: cl100k_base
// for gpt-4 (not gpt-4o, gpt-4.1 or gpt-4.5), gpt-3.5 and
// text-embedding-ada-002 / -3, o200k_base for everything else.
func EncodingFor(model string) string {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // "openai/gpt-4", a provider's prefix
	}
	switch {
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4.1"), strings.HasPrefix(m, "gpt-4.5"):
		return O200K
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"),
		strings.HasPrefix(m, "text-embedding-ada"), strings.HasPrefix(m, "text-embedding-3"):
		return CL100K
	}
	return O200K
}

// Count is the number of tokens of text for model, and whether the model's
// tokenizer counted them (false: the fallback, one token per four bytes).
func (c *Counter) Count(model, text string) (n int, exact bool) {
	if text == "" {
		return 0, true
	}
	tk := c.encoding(EncodingFor(model))
	if tk == nil {
		return Fallback(len(text)), false
	}
	w := newWithin()
	w.add(tk, text)
	return w.total(), true
}

// within counts texts token by token up to ExactLimit bytes in all, of
// which at most MergeLimit bytes of pieces merged pair by pair (the others
// at the rate of those merged), and the rest at the rate of what it
// counted.
type within struct {
	budget       mergeBudget
	bytes        int // the bytes counted token by token
	tokens, over int // their tokens, and the bytes of their pieces past budget
	rest         int // the bytes past ExactLimit
}

func newWithin() *within { return &within{budget: mergeBudget{left: MergeLimit}} }

func (w *within) add(tk *encoder, text string) {
	head := text
	if room := ExactLimit - w.bytes; len(head) > room {
		head = text[:max(room, 0)]
		for len(head) > 0 && !startsRune(text[len(head)]) {
			head = head[:len(head)-1] // cut on a character's boundary
		}
	}
	if head != "" {
		t, over := tk.countBudget(head, &w.budget)
		w.tokens, w.over = w.tokens+t, w.over+over
		w.bytes += len(head)
	}
	w.rest += len(text) - len(head)
}

func (w *within) total() int {
	n := w.tokens + w.budget.estimate(w.over)
	if w.rest == 0 {
		return n
	}
	if w.bytes == 0 {
		return Fallback(w.rest)
	}
	return n + int(int64(n)*int64(w.rest)/int64(w.bytes))
}

func startsRune(b byte) bool { return b&0xC0 != 0x80 }

// Fallback is the count of n bytes of text when no tokenizer is at hand:
// one token per four bytes, rounded up.
func Fallback(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + 3) / 4
}

func (c *Counter) encoding(name string) *encoder {
	if c == nil || c.dir == "" {
		return nil
	}
	v, _ := c.encs.LoadOrStore(name, new(encoding))
	e := v.(*encoding)
	e.once.Do(func() {
		e.enc, e.err = load(filepath.Join(c.dir, name+".json"))
		if e.err != nil {
			c.log.Warn("tokenizer unavailable; counting one token per four bytes", "encoding", name, "error", e.err.Error())
		}
	})
	return e.enc
}

// vocab is the tiktoken npm package's encoder file: the split pattern, the
// special tokens, and the ranks as "! <offset> <token> <token> ..." lines,
// each token base64 and ranked offset, offset+1, ...
type vocab struct {
	PatStr        string         `json:"pat_str"`
	SpecialTokens map[string]int `json:"special_tokens"`
	BPERanks      string         `json:"bpe_ranks"`
}

func load(path string) (*encoder, error) {
	v, ranks, err := readVocab(path)
	if err != nil {
		return nil, err
	}
	enc, err := newEncoder(ranks, v.PatStr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return enc, nil
}

// readVocab reads an encoder file and its ranks.
func readVocab(path string) (vocab, map[string]int, error) {
	var v vocab
	b, err := os.ReadFile(path)
	if err != nil {
		return v, nil, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, nil, fmt.Errorf("%s: %w", path, err)
	}
	ranks, err := parseRanks(v.BPERanks)
	if err != nil {
		return v, nil, fmt.Errorf("%s: %w", path, err)
	}
	if v.PatStr == "" || len(ranks) == 0 {
		return v, nil, fmt.Errorf("%s: no pattern or no ranks", path)
	}
	return v, ranks, nil
}

func parseRanks(s string) (map[string]int, error) {
	ranks := make(map[string]int, 200_000)
	for line := range strings.SplitSeq(s, "\n") {
		if line == "" {
			continue
		}
		fields := strings.Split(line, " ")
		if len(fields) < 2 {
			return nil, errors.New("malformed bpe_ranks line")
		}
		offset, err := strconv.Atoi(fields[1])
		if err != nil {
			return nil, fmt.Errorf("bpe_ranks offset: %w", err)
		}
		for i, t := range fields[2:] {
			tok, err := base64.StdEncoding.DecodeString(t)
			if err != nil {
				return nil, fmt.Errorf("bpe_ranks token: %w", err)
			}
			ranks[string(tok)] = offset + i
		}
	}
	return ranks, nil
}
