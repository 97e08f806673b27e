//go:build integration

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

var (
	rawKeyRE = regexp.MustCompile(`^` + billing.RawKeyPrefix + `[0-9A-Za-z]{32}$`)
	keyIDRE  = regexp.MustCompile(`^key_[0-9a-f]{16}$`)
)

// issue runs issue-key and returns the raw key and its id.
func (c *cli) issue(args ...string) (raw, keyID string) {
	c.t.Helper()
	r := c.ok(append([]string{"issue-key"}, args...)...)
	f := fields(r.stdout)
	raw, keyID = f["api key"], f["key id"]
	if !rawKeyRE.MatchString(raw) || !keyIDRE.MatchString(keyID) {
		c.t.Fatalf("issue-key printed no key or key id: %v", r)
	}
	if !strings.Contains(r.stderr, "shown this once") {
		c.t.Errorf("issue-key does not warn that the key is shown once: %v", r)
	}
	return raw, keyID
}

// noLeaks checks that the raw keys appear in no output but the stdout of
// the issue-key that printed them, once, and that neither their hashes nor
// the pepper ever appear.
func (c *cli) noLeaks(raws ...string) {
	c.t.Helper()
	for _, raw := range raws {
		hash := billing.HashKey([]byte(testPepper), raw)
		seen := 0
		for _, r := range c.runs {
			for _, out := range []string{r.stdout, r.stderr} {
				if strings.Contains(out, hash) {
					c.t.Errorf("the hash of a key is in the output of %v", r)
				}
			}
			if strings.Contains(r.stderr, raw) {
				c.t.Errorf("a raw key is on the stderr of %v", r)
			}
			if n := strings.Count(r.stdout, raw); n > 0 {
				seen += n
				if r.args[0] != "issue-key" || n != 1 {
					c.t.Errorf("a raw key is in the output of %v", r)
				}
			}
		}
		if seen != 1 {
			c.t.Errorf("the raw key was printed %d times, want once", seen)
		}
	}
	for _, r := range c.runs {
		if strings.Contains(r.stdout+r.stderr, testPepper) {
			c.t.Errorf("the pepper is in the output of %v", r)
		}
		if m := regexp.MustCompile(billing.RawKeyPrefix+`[0-9A-Za-z]+`).FindAllString(r.stdout+r.stderr, -1); len(m) > 0 && r.args[0] != "issue-key" {
			c.t.Errorf("something like a raw key (%d) in the output of %v", len(m), r)
		}
	}
}

// Every subcommand but usage, through run, against dynalite, one project's
// life: the store is checked behind the program's back at each step.
func TestProjectLifecycle(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	store := c.store()
	ctx := t.Context()
	p := newID("life")

	r := c.ok("create-project", "--id", p, "--balance", "10")
	if want := "created project " + p + ", balance $10.00 remaining\n"; r.stdout != want {
		t.Errorf("create-project stdout %q, want %q", r.stdout, want)
	}

	raw, kid := c.issue("--project", p, "--limit", "2")
	// The printed key authenticates: its hash with the pepper finds the
	// project and the key id.
	rec, err := store.Lookup(ctx, billing.HashKey([]byte(testPepper), raw))
	if err != nil {
		t.Fatalf("Lookup of the issued key: %v", err)
	}
	if rec.Project != p || rec.KeyID != kid || rec.Revoked {
		t.Errorf("Lookup = %+v, want project %s key id %s, not revoked", rec, p, kid)
	}
	// A key hashed with another pepper is unknown.
	if _, err := store.Lookup(ctx, billing.HashKey([]byte("another pepper"), raw)); !errors.Is(err, billing.ErrUnknownKey) {
		t.Errorf("Lookup with another pepper: %v, want ErrUnknownKey", err)
	}
	acct, err := store.Account(ctx, p, kid)
	if err != nil {
		t.Fatal(err)
	}
	if acct.BalanceNanos == nil || *acct.BalanceNanos != 10*billing.NanosPerUSD || acct.KeyLimitNanos == nil || *acct.KeyLimitNanos != 2*billing.NanosPerUSD {
		t.Errorf("account after create-project and issue-key: %+v", acct)
	}

	r = c.ok("show", "--project", p, "--key-id", kid)
	wantFields(t, r, map[string]string{
		"project":    p,
		"balance":    "$10.00 remaining",
		"spent":      "$0.00",
		"key id":     kid,
		"key status": "active",
		"key spent":  "$0.00",
		"key limit":  "$2.00 ($2.00 left)",
	})
	r = c.ok("show", "--project", p)
	if f := fields(r.stdout); f["balance"] != "$10.00 remaining" || f["key id"] != "" {
		t.Errorf("show without --key-id: %v", r)
	}

	// Some spend, so that set-balance shows it counts.
	if err := store.Bill(ctx, billing.Entry{RequestID: newID("req"), Project: p, KeyID: kid, Model: "m", Provider: "p",
		PromptTokens: 3, CompletionTokens: 4, CostNanos: 250_000_000, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r = c.ok("set-balance", "--project", p, "--usd", "5.5")
	if want := "project " + p + ": balance $5.50 remaining, spent $0.25\n"; r.stdout != want {
		t.Errorf("set-balance stdout %q, want %q", r.stdout, want)
	}
	if acct, err = store.Account(ctx, p, kid); err != nil || acct.BalanceNanos == nil || *acct.BalanceNanos != 5_500_000_000 || acct.SpentNanos != 250_000_000 {
		t.Errorf("account after set-balance --usd 5.5: %+v, %v", acct, err)
	}
	c.ok("set-balance", "--project", p, "--unlimited")
	if acct, err = store.Account(ctx, p, kid); err != nil || acct.BalanceNanos != nil {
		t.Errorf("account after set-balance --unlimited: %+v, %v", acct, err)
	}
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid), map[string]string{
		"balance": "unlimited", "spent": "$0.25", "key spent": "$0.25", "key limit": "$2.00 ($1.75 left)",
	})

	r = c.ok("set-limit", "--project", p, "--key-id", kid, "--none")
	if want := "key " + kid + " of project " + p + ": limit none, spent $0.25\n"; r.stdout != want {
		t.Errorf("set-limit --none stdout %q, want %q", r.stdout, want)
	}
	if acct, err = store.Account(ctx, p, kid); err != nil || acct.KeyLimitNanos != nil {
		t.Errorf("account after set-limit --none: %+v, %v", acct, err)
	}
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid), map[string]string{"key limit": "none"})
	c.ok("set-limit", "--project", p, "--key-id", kid, "--usd", "0.000014")
	if acct, err = store.Account(ctx, p, kid); err != nil || acct.KeyLimitNanos == nil || *acct.KeyLimitNanos != 14_000 {
		t.Errorf("account after set-limit --usd 0.000014: %+v, %v", acct, err)
	}
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid), map[string]string{"key limit": "$0.000014 ($0.00 left)"})

	r = c.ok("revoke-key", "--key-id", kid)
	if want := "revoked key " + kid + " of project " + p + "\n"; r.stdout != want {
		t.Errorf("revoke-key stdout %q, want %q", r.stdout, want)
	}
	if rec, err := store.Lookup(ctx, billing.HashKey([]byte(testPepper), raw)); !errors.Is(err, billing.ErrKeyRevoked) || rec.KeyID != kid {
		t.Errorf("Lookup after revoke-key: %+v, %v; want ErrKeyRevoked", rec, err)
	}
	c.ok("revoke-key", "--key-id", kid) // twice is fine
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid), map[string]string{"key status": "revoked"})

	// A second key, without a limit: the first one's revocation is not
	// its.
	raw2, kid2 := c.issue("--project", p)
	if kid2 == kid || raw2 == raw {
		t.Fatal("issue-key issued the same key twice")
	}
	if rec, err := store.Lookup(ctx, billing.HashKey([]byte(testPepper), raw2)); err != nil || rec.KeyID != kid2 {
		t.Errorf("Lookup of the second key: %+v, %v", rec, err)
	}
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid2), map[string]string{"key status": "active", "key limit": "none"})

	c.noLeaks(raw, raw2)
}

// Usage on an empty ledger, then after two entries billed through the
// Ledger (and one outside the default range).
func TestUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	now := time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)
	c.deps.now = func() time.Time { return now }
	store := c.store()
	ctx := t.Context()
	p := newID("usage")
	c.ok("create-project", "--id", p)

	r := c.ok("usage", "--project", p)
	want := "usage of project " + p + " from 2025-06-14T12:00:00Z to 2025-06-15T12:00:00Z\nno billed requests\n"
	if r.stdout != want {
		t.Errorf("usage on an empty ledger: stdout %q, want %q", r.stdout, want)
	}

	bills := []billing.Entry{
		{Model: "model-a", KeyID: "key_a", PromptTokens: 10, CompletionTokens: 5, CostNanos: 14_000, At: now.Add(-time.Hour)},
		{Model: "model-b", KeyID: "key_b", PromptTokens: 1000, CompletionTokens: 200, CostNanos: 2_500_000_000, At: now.Add(-2 * time.Hour)},
		// Outside the last 24 hours.
		{Model: "model-a", KeyID: "key_b", PromptTokens: 7, CompletionTokens: 3, CostNanos: 1_000_000_000, At: now.Add(-25 * time.Hour)},
	}
	for _, e := range bills {
		e.RequestID, e.Project, e.Provider = newID("req"), p, "prov"
		if err := store.Bill(ctx, e); err != nil {
			t.Fatal(err)
		}
	}

	r = c.ok("usage", "--project", p)
	got := usageRows(t, r.stdout)
	wantRows := map[string]string{
		"total":            "2 1010 205 $2.500014",
		"by model/model-a": "1 10 5 $0.000014",
		"by model/model-b": "1 1000 200 $2.50",
		"by key/key_a":     "1 10 5 $0.000014",
		"by key/key_b":     "1 1000 200 $2.50",
	}
	checkRows(t, r, got, wantRows)

	r = c.ok("usage", "--project", p, "--from", "2025-06-14T10:00:00+02:00", "--to", now.Format(time.RFC3339))
	if !strings.HasPrefix(r.stdout, "usage of project "+p+" from 2025-06-14T08:00:00Z to 2025-06-15T12:00:00Z\n") {
		t.Errorf("the range in UTC: %v", r)
	}
	checkRows(t, r, usageRows(t, r.stdout), map[string]string{
		"total":            "3 1017 208 $3.500014",
		"by model/model-a": "2 17 8 $1.000014",
		"by model/model-b": "1 1000 200 $2.50",
		"by key/key_a":     "1 10 5 $0.000014",
		"by key/key_b":     "2 1007 203 $3.50",
	})
	// --to alone: the 24 hours before it; a date is midnight UTC.
	r = c.ok("usage", "--project", p, "--to", "2025-06-15")
	checkRows(t, r, usageRows(t, r.stdout), map[string]string{"total": "1 7 3 $1.00"})
	// [from, to): the entry at now-1h is excluded by --to now-1h.
	r = c.ok("usage", "--project", p, "--from", "2025-06-15T09:00:00Z", "--to", "2025-06-15T11:00:00Z")
	checkRows(t, r, usageRows(t, r.stdout), map[string]string{"total": "1 1000 200 $2.50"})

	wantFields(t, c.ok("show", "--project", p), map[string]string{"balance": "unlimited", "spent": "$3.500014",
		// Sunday 15 June 2025: the entry of the day before is in the same
		// ISO week and month.
		"spent this day":   "$2.500014, from 2025-06-15T00:00:00Z",
		"spent this week":  "$3.500014, from 2025-06-09T00:00:00Z",
		"spent this month": "$3.500014, from 2025-06-01T00:00:00Z",
	})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `providers:
  - {name: up, api: simulated}
models:
  - id: m
    routes: [{provider: up, model: sim-small}]
projects:
  - id: %s
    budget: {amount: 3, period: day}
    keys: [{key: sk-admin-budget-0123456789}]
`, p), 0o600); err != nil {
		t.Fatal(err)
	}
	wantFields(t, c.ok("show", "--project", p, "--config", cfg), map[string]string{
		"budget": "$3.00 a day ($0.499986 left, renews 2025-06-16T00:00:00Z)",
	})
}

// usageRows reads usage's tables: "section/name" (or "total") -> the
// numbers, space separated.
func usageRows(t *testing.T, out string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	section := ""
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || f[0] == "usage" || f[0] == "requests":
		case f[0] == "by":
			section = f[0] + " " + f[1]
		case len(f) == 5 && section == "":
			rows[f[0]] = strings.Join(f[1:], " ")
		case len(f) == 5:
			rows[section+"/"+f[0]] = strings.Join(f[1:], " ")
		default:
			t.Errorf("usage line %q", line)
		}
	}
	return rows
}

func checkRows(t *testing.T, r result, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q, in %v", k, got[k], v, r)
		}
	}
	if len(want) > 1 && len(got) != len(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}

// Operations that fail: exit 1, one line on stderr, nothing on stdout.
func TestOperationalErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	p, other, missing := newID("ops"), newID("ops-other"), newID("ops-missing")
	c.ok("create-project", "--id", p, "--balance", "1")
	c.ok("create-project", "--id", other)
	_, otherKey := c.issue("--project", other)
	unknownKeyID := "key_00000000000000ff"

	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"create-project", "--id", p}, want: `admin create-project: project "` + p + `" exists (set-balance changes its balance)`},
		{args: []string{"issue-key", "--project", missing}, want: `admin issue-key: unknown project "` + missing + `" (create-project creates it)`},
		{args: []string{"issue-key", "--project", missing, "--limit", "3"}, want: `unknown project "` + missing + `"`},
		{args: []string{"show", "--project", missing}, want: `admin show: unknown project "` + missing + `"`},
		{args: []string{"set-balance", "--project", missing, "--usd", "1"}, want: `unknown project "` + missing + `"`},
		{args: []string{"set-limit", "--project", missing, "--key-id", otherKey, "--none"}, want: `unknown project "` + missing + `"`},
		{args: []string{"usage", "--project", missing}, want: `admin usage: unknown project "` + missing + `"`},
		{args: []string{"revoke-key", "--key-id", unknownKeyID}, want: `admin revoke-key: unknown key id "` + unknownKeyID + `"`},
		{args: []string{"show", "--project", p, "--key-id", unknownKeyID}, want: `unknown key id "` + unknownKeyID + `"`},
		{args: []string{"set-limit", "--project", p, "--key-id", otherKey, "--usd", "1"}, want: "admin set-limit: key " + otherKey + ` does not belong to project "` + p + `"`},
		{args: []string{"show", "--project", p, "--key-id", otherKey}, want: "does not belong to project"},
		{args: []string{"show", "--project", p}, env: map[string]string{EnvTable: "no-such-table"}, want: `admin show: DynamoDB table "no-such-table" does not exist (the SAM stack creates it; locally pass --create-table or set BUZZGATE_CREATE_TABLE=true)`},
	} {
		saved := c.env
		c.env = map[string]string{}
		for k, v := range saved {
			c.env[k] = v
		}
		for k, v := range tc.env {
			c.env[k] = v
		}
		r := c.run(tc.args...)
		c.env = saved
		if r.code != 1 || r.stdout != "" {
			t.Errorf("want exit 1 and nothing on stdout: %v", r)
			continue
		}
		if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
			t.Errorf("want one line on stderr: %v", r)
		}
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("stderr %q, want it to have %q", r.stderr, tc.want)
		}
	}
	// Nothing changed the other project's key.
	wantFields(t, c.ok("show", "--project", other, "--key-id", otherKey), map[string]string{"key status": "active", "key limit": "none"})
	wantFields(t, c.ok("show", "--project", p), map[string]string{"balance": "$1.00 remaining"})
}

// The real client: the AWS SDK's default config, pointed at dynalite by
// AWS_ENDPOINT_URL_DYNAMODB; the table created by --create-table or
// BUZZGATE_CREATE_TABLE=true, and missing otherwise. (Not parallel:
// t.Setenv.)
func TestDefaultAWSConfig(t *testing.T) {
	endpoint := server.Endpoint(t)
	none := t.TempDir() + "/none"
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB":   endpoint,
		"AWS_ENDPOINT_URL":            "",
		"AWS_REGION":                  "us-east-1",
		"AWS_DEFAULT_REGION":          "",
		"AWS_ACCESS_KEY_ID":           "dynalite",
		"AWS_SECRET_ACCESS_KEY":       "dynalite",
		"AWS_SESSION_TOKEN":           "",
		"AWS_PROFILE":                 "",
		"AWS_DEFAULT_PROFILE":         "",
		"AWS_CONFIG_FILE":             none,
		"AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
	tableA, tableB := dynalite.TableName("admin-flag"), dynalite.TableName("admin-env")
	c := &cli{t: t, env: map[string]string{EnvKeyPepper: testPepper, EnvTable: tableA}}
	p := newID("default")

	r := c.run("create-project", "--id", p)
	if r.code != 1 || !strings.Contains(r.stderr, `DynamoDB table "`+tableA+`" does not exist`) {
		t.Errorf("want exit 1 for a missing table: %v", r)
	}
	c.ok("create-project", "--id", p, "--balance", "3", "--create-table")
	wantFields(t, c.ok("show", "--project", p), map[string]string{"balance": "$3.00 remaining"})
	raw, kid := c.issue("--project", p)

	// The store as the gateway would build it sees the key.
	client := dynalite.Client(t, endpoint)
	rec, err := dynamoledger.New(client, tableA, dynamoledger.Options{}).Lookup(t.Context(), billing.HashKey([]byte(testPepper), raw))
	if err != nil || rec.KeyID != kid || rec.Project != p {
		t.Errorf("Lookup: %+v, %v", rec, err)
	}

	c.env[EnvTable] = tableB
	c.env[EnvCreateTable] = "false"
	if r := c.run("show", "--project", p); r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("BUZZGATE_CREATE_TABLE=false creates no table: %v", r)
	}
	c.env[EnvCreateTable] = "true"
	c.ok("create-project", "--id", p)
	delete(c.env, EnvCreateTable)
	wantFields(t, c.ok("show", "--project", p), map[string]string{"balance": "unlimited"})

	// The default table name.
	delete(c.env, EnvTable)
	if r := c.run("show", "--project", p); r.code != 1 || !strings.Contains(r.stderr, `table "buzzgate" does not exist`) {
		t.Errorf("want the default table, buzzgate: %v", r)
	}

	t.Setenv("AWS_REGION", "")
	if r := c.run("show", "--project", p); r.code != 1 || !strings.Contains(r.stderr, "no AWS region: set AWS_REGION") {
		t.Errorf("want exit 1 without a region: %v", r)
	}
	c.noLeaks(raw)
}

// issue-key whose limit cannot be set: the key is not shown, and revoked.
func TestIssueKeyLimitFails(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var failed atomic.Bool
	client := dynalite.Client(t, server.Endpoint(t), func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("failFirstUpdate",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if awsmiddleware.GetOperationName(ctx) == "UpdateItem" && failed.CompareAndSwap(false, true) {
						return middleware.InitializeOutput{}, middleware.Metadata{}, errors.New("injected failure")
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	})
	p := newID("limitfail")
	c.ok("create-project", "--id", p)
	healthy := c.deps
	c.deps.dynamo = func(context.Context) (*dynamodb.Client, error) { return client, nil }
	r := c.run("issue-key", "--project", p, "--limit", "1")
	c.deps = healthy
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "its limit or rates could not be set") || !strings.Contains(r.stderr, "it is not shown and was revoked") {
		t.Fatalf("want exit 1, no key, and a revoked key: %v", r)
	}
	kid := regexp.MustCompile(`key_[0-9a-f]{16}`).FindString(r.stderr)
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid), map[string]string{"key status": "revoked", "key limit": "none"})
	if m := regexp.MustCompile(billing.RawKeyPrefix).FindString(r.stdout + r.stderr); m != "" {
		t.Errorf("a raw key in %v", r)
	}
}

// set-key-rates sets an issued key's rpm, tpm and budget (replacing what it
// had), which Lookup then returns and show prints; a budget needs its
// period.
func TestSetKeyRates(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	store := c.store()
	p := newID("rates")
	c.ok("create-project", "--id", p)
	raw, kid := c.issue("--project", p)
	r := c.ok("set-key-rates", "--project", p, "--key-id", kid, "--rpm", "60", "--tpm", "200000", "--budget", "5", "--period", "day")
	if want := "key " + kid + " of project " + p + ": rpm 60, tpm 200000, budget $5.00 a day\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	rec, err := store.Lookup(t.Context(), billing.HashKey([]byte(testPepper), raw))
	if err != nil || rec.Rates.RPM != 60 || rec.Rates.TPM != 200000 || rec.Rates.Budget == nil || rec.Rates.Budget.Amount != 5 || rec.Rates.Budget.Period != "day" {
		t.Fatalf("Lookup: %+v, %v", rec.Rates, err)
	}
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid), map[string]string{"key rates": "rpm 60, tpm 200000, budget $5.00 a day"})
	c.ok("set-key-rates", "--project", p, "--key-id", kid, "--tpm", "10")
	// issue-key takes the same flags.
	raw2, kid2 := c.issue("--project", p, "--rpm", "7", "--budget", "2", "--period", "week")
	if rec, err := store.Lookup(t.Context(), billing.HashKey([]byte(testPepper), raw2)); err != nil || rec.Rates.RPM != 7 || rec.Rates.Budget == nil || rec.Rates.Budget.Period != "week" {
		t.Errorf("a key issued with rates: %+v, %v", rec.Rates, err)
	}
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid2), map[string]string{"key rates": "rpm 7, tpm none, budget $2.00 a week"})
	wantFields(t, c.ok("show", "--project", p, "--key-id", kid), map[string]string{"key rates": "rpm none, tpm 10, budget none"})
	for _, args := range [][]string{
		{"--budget", "5"},
		{"--period", "day"},
		{"--budget", "5", "--period", "year"},
		{"--rpm", "-1"},
	} {
		r := c.run(append([]string{"set-key-rates", "--project", p, "--key-id", kid}, args...)...)
		if r.code == 0 {
			t.Errorf("set-key-rates %v: accepted", args)
		}
	}
}

// set-project-rates sets a project's rpm, tpm and budget, which show
// prints and the ledger's Account returns.
func TestSetProjectRates(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	p := newID("prates")
	c.ok("create-project", "--id", p)
	r := c.ok("set-project-rates", "--project", p, "--rpm", "600", "--budget", "100", "--period", "month")
	if want := "project " + p + ": rpm 600, tpm none, budget $100.00 a month\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	wantFields(t, c.ok("show", "--project", p), map[string]string{"rates": "rpm 600, tpm none, budget $100.00 a month"})
	if r := c.run("set-project-rates", "--project", newID("missing"), "--rpm", "1"); r.code == 0 {
		t.Errorf("an unknown project: accepted")
	}
	if r := c.run("set-project-rates", "--project", p, "--period", "week"); r.code == 0 {
		t.Errorf("a period without a budget: accepted")
	}
}
