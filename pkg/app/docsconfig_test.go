package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// yamlBlock matches a fenced YAML block of a Markdown file.
var yamlBlock = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")

// topLevel matches a top-level key of a YAML block.
var topLevel = regexp.MustCompile(`(?m)^([a-z_]+):`)

// TestDocConfigsStart parses every complete config the docs show (a yaml
// block with both providers: and models: at its top level; any other
// block is a snippet of one) with catalog.Parse and builds the gateway
// from it, as start-up does, so that a config pasted from the docs starts.
func TestDocConfigsStart(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	configs := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
			keys := map[string]bool{}
			for _, k := range topLevel.FindAllStringSubmatch(m[1], -1) {
				keys[k[1]] = true
			}
			if !keys["providers"] || !keys["models"] {
				continue
			}
			configs++
			first, _, _ := strings.Cut(strings.TrimSpace(m[1]), "\n")
			cfg, err := catalog.Parse([]byte(m[1]))
			if err != nil {
				t.Errorf("%s: the config starting %q: %v", f, first, err)
				continue
			}
			_, err = FromConfig(cfg, Options{
				Getenv:         func(string) string { return "" },
				Logger:         slog.New(slog.DiscardHandler),
				AWSCredentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
			})
			if err != nil {
				t.Errorf("%s: the config starting %q does not start: %v", f, first, err)
			}
		}
	}
	if configs < 3 {
		t.Errorf("%d complete configs in the docs, want at least 3 (configuration.md, bedrock.md, quickstart.md)", configs)
	}
}
