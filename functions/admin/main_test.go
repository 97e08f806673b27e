//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

// server is the one dynalite of the package, started by the first test
// that needs it.
var server dynalite.Shared

func TestMain(m *testing.M) { dynalite.Main(m, &server) }

func sharedTable(t *testing.T) string { return server.SharedTable(t) }

var idSeq struct {
	sync.Mutex
	n int
}

// newID returns an id unique within the process (and across runs on one
// dynalite: the pid).
func newID(prefix string) string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), idSeq.n)
}

// newCLI returns a cli on the shared table with the test pepper.
func newCLI(t *testing.T) *cli {
	t.Helper()
	table := sharedTable(t)
	client := dynalite.Client(t, server.Endpoint(t))
	return &cli{
		t:   t,
		env: map[string]string{EnvKeyPepper: testPepper, EnvTable: table},
		deps: deps{dynamo: func(context.Context) (*dynamodb.Client, error) {
			return client, nil
		}},
	}
}

// ok runs the program and fails the test unless it exits 0.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("want exit 0, got %v", r)
	}
	return r
}

// store is a Store on the shared table, for the checks behind the
// program's back.
func (c *cli) store() *dynamoledger.Store {
	c.t.Helper()
	client, err := c.deps.dynamo(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	// The store's clock is the command's: a bill's periods are kept by
	// how they stand to now, and a test's bills are dated by its clock.
	now := c.deps.now
	if now == nil {
		now = time.Now
	}
	return dynamoledger.New(client, c.env[EnvTable], dynamoledger.Options{Pepper: []byte(testPepper), Now: now})
}

// fields returns the value of each "name  value" line of a show-like
// output.
func fields(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		// The names are one or two words; the value starts after the
		// first run of two spaces.
		name, value, ok := strings.Cut(line, "  ")
		if ok {
			m[name] = strings.TrimSpace(value)
		}
	}
	return m
}

func wantFields(t *testing.T, r result, want map[string]string) {
	t.Helper()
	got := fields(r.stdout)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q = %q, want %q in\n%v", k, got[k], v, r)
		}
	}
}
