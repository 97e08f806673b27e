//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/rie"
	"github.com/buzzgate/buzzgate/internal/samtemplate"
)

// What SAM CLI does locally, without SAM CLI or Docker: the function runs
// under the emulator with the environment SAM CLI would give it (the
// template's variables, overridden by an --env-vars file;
// internal/samtemplate) and its answer is read as `sam local start-api`
// reads it (rie.DecodeBuffered).

// samEnv is the environment `sam local invoke ApiFunction --env-vars
// events/<file>` gives the function, with replace applied after (a
// test's own endpoint or table), as NAME=value lines.
func samEnv(t *testing.T, file string, replace map[string]string) []string {
	t.Helper()
	tpl := loadTemplate(t)
	vars, err := os.ReadFile(filepath.Join(eventsDir, file))
	if err != nil {
		t.Fatal(err)
	}
	env, err := samtemplate.LocalEnv(tpl, gatewayFunction, vars)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range replace {
		if _, ok := env[k]; !ok {
			t.Fatalf("%s is not in the function's environment: the template does not declare it", k)
		}
		env[k] = v
	}
	// The emulator's invocation budget (SAM CLI runs the template's 900 s).
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = "60"
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// invokeBuffered sends events/<name> and reads the answer as SAM CLI does.
func invokeBuffered(t *testing.T, emu *rie.Emulator, name string) *rie.Response {
	t.Helper()
	ev, err := os.ReadFile(filepath.Join(eventsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, err := emu.Invoke(ctx, ev)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	resp, err := rie.DecodeBuffered(raw)
	if err != nil {
		t.Fatalf("%s: SAM CLI could not read the answer: %v", name, err)
	}
	var p struct {
		IsBase64Encoded bool `json:"isBase64Encoded"`
	}
	if json.Unmarshal(raw, &p); p.IsBase64Encoded {
		// The API lists no binary media type, so SAM CLI (and API Gateway)
		// would pass the base64 text on as it is.
		t.Errorf("%s: a base64 body: %.200s", name, raw)
	}
	return resp
}

// TestSAMLocalEvents: with events/env.json (the embedded demo config, the
// memory store), every sample event answers as events/README.md says, in
// one warm execution environment (`sam local start-api`, which keeps the
// container between requests with --warm-containers, or the emulator's
// own reuse), streaming requests included, as buffered JSON.
func TestSAMLocalEvents(t *testing.T) {
	env := samEnv(t, "env.json", nil)
	if !slices.Contains(env, "AWS_SAM_LOCAL=true") || !slices.Contains(env, "BUZZGATE_STORE=memory") || !slices.Contains(env, "BUZZGATE_CONFIG=") {
		t.Fatalf("events/env.json does not give the local setup: %v", env)
	}
	emu := startEmulator(t, env)
	for _, tt := range eventTests(t) {
		t.Run(tt.event, func(t *testing.T) {
			tt.check(t, invokeBuffered(t, emu, tt.event))
		})
	}
}

// TestSAMLocalDynamoDB: with events/env.dynamodb.json pointed at dynalite
// (its endpoint and a table the test created, as the README says to), each
// event runs in a new execution environment, as every `sam local invoke`
// does, and the keyed ones still replay and conflict: the record is in
// DynamoDB, not in a process.
func TestSAMLocalDynamoDB(t *testing.T) {
	endpoint, table := newTable(t)
	env := samEnv(t, "env.dynamodb.json", map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": endpoint,
		"BUZZGATE_TABLE":            table,
	})
	if !slices.Contains(env, "BUZZGATE_STORE=dynamodb") || !slices.Contains(env, "BUZZGATE_CREATE_TABLE=false") {
		t.Fatalf("events/env.dynamodb.json does not select DynamoDB: %v", env)
	}
	for _, tt := range eventTests(t) {
		t.Run(tt.event, func(t *testing.T) {
			emu := startEmulator(t, env)
			tt.check(t, invokeBuffered(t, emu, tt.event))
			emu.Close()
		})
	}
}
