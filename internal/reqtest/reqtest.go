// Package reqtest holds what the tests of the request translations share,
// whichever package they are in: JSON decoded with its numbers kept as
// text, the checks of an invalid_request error, the recorded agent
// requests used as fuzz seeds, and the differential check of a
// translation's hub (CheckHub, HubBodies). Of the project it imports the
// hub (pkg/llm) alone, so that the protocol packages' own tests can use
// it.
package reqtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// DecodeJSON decodes JSON keeping numbers as their text, so a comparison
// also checks number fidelity.
func DecodeJSON(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// CheckNamesParam fails unless err is an invalid_request *llm.Error that
// names its param, or one about the body as a whole.
func CheckNamesParam(t *testing.T, err error) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) || e.Code != llm.CodeInvalidRequest {
		t.Fatalf("error %v, want an invalid_request *llm.Error", err)
	}
	if e.Param == "" && !strings.HasPrefix(e.Message, "request body ") {
		t.Fatalf("error %v names no param", err)
	}
}

// CheckInvalid fails unless err is an invalid_request *llm.Error naming
// param, whose message contains msg.
func CheckInvalid(t *testing.T, err error, param, msg string) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v, want *llm.Error", err, err)
	}
	if e.Code != llm.CodeInvalidRequest || e.Param != param || !strings.Contains(e.Message, msg) {
		t.Errorf("got code %q param %q message %q; want invalid_request param %q message containing %q", e.Code, e.Param, e.Message, param, msg)
	}
}

// AgentBodies are the bodies of the recorded agent requests whose file
// name starts with prefix (internal/systemtest/testdata/agents), as fuzz
// seeds.
func AgentBodies(f testing.TB, prefix string) [][]byte {
	f.Helper()
	root, err := filepath.Abs(".")
	if err != nil {
		f.Fatal(err)
	}
	for _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil; _, err = os.Stat(filepath.Join(root, "go.mod")) {
		if filepath.Dir(root) == root {
			f.Fatal("no go.mod above the test's directory")
		}
		root = filepath.Dir(root)
	}
	paths, err := filepath.Glob(filepath.Join(root, "internal/systemtest/testdata/agents", prefix+"*.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no recorded %s requests: %v", prefix, err)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var rec struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			f.Fatal(err)
		}
		out = append(out, rec.Body)
	}
	return out
}
