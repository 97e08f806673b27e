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

// ExactLimit is the most text counted token by token in one call, and
// MergeLimit the most of it in pieces that are not a token themselves,
// which are merged pair by pair: the rest of a longer text is counted at
// the rate of what was counted. A count runs in a request's finishing
// step, and these keep it to milliseconds whatever the text: ordinary
// text is counted at over 50 MB a second (most of its pieces are tokens,
// and 10 to 20% of its bytes are merged, so it is counted token by token
// to ExactLimit), and merging takes 0.1 to 0.35 ms a KiB of the costliest
// text, one long word of random letters (BenchmarkCountWorstCase).
const (
	ExactLimit = 256 << 10
	MergeLimit = 64 << 10
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
	merge := MergeLimit
	n, _, _ = countWithin(tk, text, ExactLimit, &merge)
	return n, true
}

// countWithin counts text with tk, token by token up to limit bytes and
// while the bytes merged stay within *merge (which it takes them from),
// and the rest at the rate of what it counted so: n in all, of which
// tokens in the first counted bytes.
func countWithin(tk *encoder, text string, limit int, merge *int) (n, counted, tokens int) {
	head := text
	if len(head) > limit {
		head = text[:limit]
		for len(head) > 0 && !startsRune(text[len(head)]) {
			head = head[:len(head)-1] // cut on a character's boundary
		}
	}
	tokens, counted, size := tk.countPrefix(head, merge)
	if counted == size && len(head) == len(text) {
		return tokens, len(text), tokens
	}
	if counted == 0 {
		return Fallback(len(text)), 0, 0
	}
	if size != len(head) { // bytes that are not UTF-8 were counted as U+FFFD
		counted = int(int64(counted) * int64(len(head)) / int64(size))
		if counted == 0 {
			return Fallback(len(text)), 0, 0
		}
	}
	return int(float64(tokens) * float64(len(text)) / float64(counted)), counted, tokens
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
