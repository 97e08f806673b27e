package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

const testPepper = "admin test pepper"

// result is one run of the program.
type result struct {
	args   []string
	code   int
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("admin %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cli runs the program in process, against dynalite or offline, and keeps
// every run (the leak checks read them).
type cli struct {
	t    *testing.T
	env  map[string]string
	deps deps
	runs []result
}

// offline returns a cli whose store must not be used: usage errors are
// found before any call.
func offline(t *testing.T) *cli {
	return &cli{
		t:   t,
		env: map[string]string{EnvKeyPepper: testPepper, EnvTable: "never-used"},
		deps: deps{dynamo: func(context.Context) (*dynamodb.Client, error) {
			t.Error("the DynamoDB client was built for a command line that is wrong")
			return nil, fmt.Errorf("offline")
		}},
	}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	code := run(ctx, args, func(k string) string { return c.env[k] }, &stdout, &stderr, c.deps)
	r := result{args: args, code: code, stdout: stdout.String(), stderr: stderr.String()}
	c.runs = append(c.runs, r)
	return r
}

func TestHelp(t *testing.T) {
	t.Parallel()
	c := offline(t)
	delete(c.env, EnvKeyPepper) // help needs no pepper
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		r := c.run(args...)
		if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: admin <command> [flags]\n") {
			t.Errorf("want the usage on stdout and exit 0: %v", r)
		}
		for _, cmd := range commands {
			if !strings.Contains(r.stdout, "\n  "+cmd.name+" ") {
				t.Errorf("the usage does not list %s: %v", cmd.name, r)
			}
		}
		for _, s := range []string{EnvKeyPepper, EnvTable, EnvCreateTable, "AWS_ENDPOINT_URL_DYNAMODB", "Examples:", "Exit status"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("the usage does not mention %s", s)
			}
		}
	}
	for _, cmd := range commands {
		for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}, {"help", cmd.name}} {
			r := c.run(args...)
			if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: admin "+cmd.name+" ") {
				t.Errorf("want %s's usage on stdout and exit 0: %v", cmd.name, r)
			}
			for _, s := range append([]string{"Flags:", "--create-table", "Examples:", "  admin " + cmd.name + " --"}, cmd.examples...) {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("%s's usage does not have %q: %v", cmd.name, s, r)
				}
			}
		}
	}
	r := c.run("set-limit", "--help")
	for _, s := range []string{"usage: admin set-limit --project ID --key-id ID (--usd N | --none)", "--usd USD", "--none", "--key-id ID"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("set-limit --help has no %q: %v", s, r)
		}
	}
}

// Command lines that are wrong: exit 2, the message and the usage on
// stderr, nothing on stdout, and no DynamoDB client built.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		env   map[string]string // added to the cli's
		want  string            // in stderr
		usage string            // the usage that follows (prefix of its line)
	}{
		{args: nil, want: "admin: no command", usage: "usage: admin <command>"},
		{args: []string{"frobnicate"}, want: `admin: unknown command "frobnicate"`, usage: "usage: admin <command>"},
		{args: []string{"--create-table"}, want: `unknown command "--create-table"`, usage: "usage: admin <command>"},
		{args: []string{"help", "frobnicate"}, want: `unknown command "frobnicate"`, usage: "usage: admin <command>"},
		{args: []string{"create-project"}, want: "admin create-project: --id is required", usage: "usage: admin create-project"},
		{args: []string{"create-project", "--balance", "5"}, want: "--id is required", usage: "usage: admin create-project"},
		{args: []string{"issue-key"}, want: "--project is required", usage: "usage: admin issue-key"},
		{args: []string{"revoke-key"}, want: "--key-id is required", usage: "usage: admin revoke-key"},
		{args: []string{"set-balance", "--usd", "5"}, want: "--project is required", usage: "usage: admin set-balance"},
		{args: []string{"set-limit", "--project", "p", "--usd", "5"}, want: "--key-id is required", usage: "usage: admin set-limit"},
		{args: []string{"show"}, want: "--project is required", usage: "usage: admin show"},
		{args: []string{"usage"}, want: "--project is required", usage: "usage: admin usage"},
		// Negative, and otherwise wrong, amounts.
		{args: []string{"create-project", "--id", "p", "--balance", "-1"}, want: `invalid value "-1" for flag --balance: must not be negative`, usage: "usage: admin create-project"},
		{args: []string{"issue-key", "--project", "p", "--limit", "-0.01"}, want: "must not be negative", usage: "usage: admin issue-key"},
		{args: []string{"set-balance", "--project", "p", "--usd", "-5"}, want: "must not be negative", usage: "usage: admin set-balance"},
		{args: []string{"set-limit", "--project", "p", "--key-id", "k", "--usd", "-1e-9"}, want: "must not be negative", usage: "usage: admin set-limit"},
		{args: []string{"set-balance", "--project", "p", "--usd", "NaN"}, want: "not an amount of US dollars", usage: "usage: admin set-balance"},
		{args: []string{"set-balance", "--project", "p", "--usd", "ten"}, want: "not an amount of US dollars", usage: "usage: admin set-balance"},
		{args: []string{"set-balance", "--project", "p", "--usd", "1e12"}, want: "over $1,000,000,000.00", usage: "usage: admin set-balance"},
		{args: []string{"set-balance", "--project", "p", "--usd", "5", "--unlimited"}, want: "--usd and --unlimited exclude each other", usage: "usage: admin set-balance"},
		{args: []string{"set-balance", "--project", "p"}, want: "one of --usd and --unlimited is required", usage: "usage: admin set-balance"},
		{args: []string{"set-limit", "--project", "p", "--key-id", "k"}, want: "one of --usd and --none is required", usage: "usage: admin set-limit"},
		{args: []string{"set-limit", "--project", "p", "--key-id", "k", "--usd", "1", "--none"}, want: "exclude each other", usage: "usage: admin set-limit"},
		// Unknown flags, stray arguments, bad ids and times.
		{args: []string{"show", "--project", "p", "--bogus"}, want: "flag provided but not defined: --bogus", usage: "usage: admin show"},
		{args: []string{"show", "--project", "p", "extra"}, want: `unexpected argument "extra"`, usage: "usage: admin show"},
		{args: []string{"show", "--project", "a b"}, want: "without whitespace", usage: "usage: admin show"},
		{args: []string{"show", "--project", strings.Repeat("p", billing.MaxIDBytes+1)}, want: "over 256 bytes", usage: "usage: admin show"},
		{args: []string{"usage", "--project", "p", "--from", "yesterday"}, want: "want an RFC 3339 time", usage: "usage: admin usage"},
		{args: []string{"usage", "--project", "p", "--from", "2025-06-02", "--to", "2025-06-01"}, want: "is not before --to", usage: "usage: admin usage"},
		{args: []string{"usage", "--project", "p", "--from", "2999-01-01"}, want: "--from 2999-01-01T00:00:00Z is not before --to", usage: "usage: admin usage"},
		{args: []string{"usage", "--project", "p", "--from", "2025-06-01", "--to", "2025-06-01"}, want: "is not before --to", usage: "usage: admin usage"},
		// The environment.
		{args: []string{"create-project", "--id", "p"}, env: map[string]string{EnvKeyPepper: ""}, want: "admin: BUZZGATE_KEY_PEPPER is not set: set it to the gateway's key pepper (keys are stored hashed with it, and a key hashed with another pepper can never authenticate)"},
		{args: []string{"show", "--project", "p"}, env: map[string]string{EnvCreateTable: "yes"}, want: `BUZZGATE_CREATE_TABLE="yes": want true or false`},
	} {
		c := offline(t)
		for k, v := range tc.env {
			c.env[k] = v
		}
		r := c.run(tc.args...)
		if r.code != 2 || r.stdout != "" {
			t.Errorf("want exit 2 and nothing on stdout: %v", r)
			continue
		}
		first, rest, _ := strings.Cut(r.stderr, "\n")
		if !strings.Contains(first, tc.want) {
			t.Errorf("the first line of stderr is %q, want it to have %q (%v)", first, tc.want, r)
		}
		if tc.usage == "" {
			if rest != "" {
				t.Errorf("want one line on stderr: %v", r)
			}
		} else if !strings.HasPrefix(rest, "\n"+tc.usage) {
			t.Errorf("want the usage (%q...) after the message: %v", tc.usage, r)
		}
	}
}

func TestFormatUSD(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0:                     "$0.00",
		1:                     "$0.000000001",
		14_000:                "$0.000014",
		10_000_000:            "$0.01",
		1_500_000_000:         "$1.50",
		-300_000_000:          "-$0.30",
		1_234_567_000_000_000: "$1,234,567.00",
		123_000_000_000:       "$123.00",
		-9223372036854775808:  "-$9,223,372,036.854775808",
		9223372036854775807:   "$9,223,372,036.854775807",
	} {
		if got := formatUSD(n); got != want {
			t.Errorf("formatUSD(%d) = %q, want %q", n, got, want)
		}
	}
}
