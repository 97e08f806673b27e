package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileMatches: the Dockerfile builds what make image does: its
// pins are the Makefile's and go.mod's, its binary is built with the
// Makefile's flags, and its image has the same user, port, environment
// and entrypoint as Build's config.
func TestDockerfileMatches(t *testing.T) {
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	docker, makefile, gomod := read("../../Dockerfile"), read("../../Makefile"), read("../../go.mod")
	find := func(what, text, re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("%s: no match for %s", what, re)
		}
		return m[1]
	}
	if d, m := find("Dockerfile", docker, `(?m)^ARG TIKTOKEN_VERSION=(\S+)$`), find("Makefile", makefile, `(?m)^TIKTOKEN_VERSION := (\S+)$`); d != m {
		t.Errorf("TIKTOKEN_VERSION: Dockerfile %s, Makefile %s", d, m)
	}
	if d, m := find("Dockerfile", docker, `(?m)^ARG GO_VERSION=(\S+)$`), find("go.mod", gomod, `(?m)^go (\d+\.\d+)`); d != m {
		t.Errorf("Go: Dockerfile %s, go.mod %s", d, m)
	}
	build := find("Makefile", makefile, `(?m)^LAMBDA_BUILD := CGO_ENABLED=0 \$\(GO\) build (.+)$`)
	if !strings.Contains(docker, "go build "+build+" -o /out/buzzgate ./functions/api") {
		t.Errorf("the Dockerfile does not build with the Makefile's flags %q", build)
	}
	for _, line := range []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER " + user,
		"EXPOSE " + port,
		"ENTRYPOINT [\"" + binPath + "\"]",
		"ENV BUZZGATE_ADDR=0.0.0.0:" + port + " \\",
		"    BUZZGATE_TOKENIZER_DIR=" + vocabDir,
		"COPY --from=vocab /tokenizer/ " + vocabDir + "/",
		"STOPSIGNAL SIGTERM",
		"LABEL org.opencontainers.image.title=buzzgate \\",
		"    org.opencontainers.image.licenses=Apache-2.0",
	} {
		if !strings.Contains(docker, "\n"+line+"\n") {
			t.Errorf("the Dockerfile has no line %q", line)
		}
	}
}
