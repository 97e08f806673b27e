//go:build integration

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/app"
	"github.com/buzzgate/buzzgate/pkg/billing"
)

// TestRevokeConfigKey: a key from the config file, once the gateway (as
// app.New builds it on DynamoDB, the demo config and its key sk-demo) has
// served its project, can be revoked with the admin tool by its id
// (billing.ConfigKeyID), and then stops working on every new instance; the
// config still lists it. Before, the gateway never put config keys into the
// table, and revoke-key answered "unknown key id".
func TestRevokeConfigKey(t *testing.T) {
	c := newCLI(t)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", server.Endpoint(t))
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	env := map[string]string{
		app.EnvStore: "dynamodb", app.EnvTable: c.env[EnvTable], app.EnvKeyPepper: testPepper, app.EnvCreateTable: "false",
	}
	newGateway := func() http.Handler {
		a, err := app.New(context.Background(), app.Options{Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		return a.Handler
	}
	post := func(h http.Handler) int {
		req := httptest.NewRequest("POST", "/api/v1/chat/completions",
			strings.NewReader(`{"model":"demo/chat","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer sk-demo")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post(newGateway()); code != 200 {
		t.Fatalf("the config key before its revocation: %d", code)
	}
	id := billing.ConfigKeyID([]byte(testPepper), "sk-demo")
	if r := c.run("show", "--project", "demo", "--key-id", id); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("admin show --project demo --key-id %s: exit %d, stdout %q, stderr %q", id, r.code, r.stdout, r.stderr)
	}
	if r := c.run("revoke-key", "--key-id", id); r.code != 0 {
		t.Fatalf("admin revoke-key --key-id %s (the demo config key): exit %d, stderr %q", id, r.code, r.stderr)
	}
	// A new instance (no key cache, nothing seeded): the key stays revoked.
	if code := post(newGateway()); code != 401 {
		t.Errorf("the config key after its revocation: %d, want 401", code)
	}
}
