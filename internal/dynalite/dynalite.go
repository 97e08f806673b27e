// Package dynalite runs dynalite, a local DynamoDB stand-in (a Node.js
// program installed by `make tools` into .tools/dynalite), for the tests of
// the DynamoDB code and for `make invoke` (internal/invoke); nothing the
// gateway ships imports it.
//
// One server per test package is the cheap way (Shared, with Main as the
// TestMain); Start is the per-test variant and Launch the bare one. Client
// builds an SDK client for a server.
//
// The server is in memory (no --path) and tables become ACTIVE at once
// (--createTableMs 0). dynalite ignores ReturnValuesOnConditionCheckFailure;
// AllOldProxy puts in front of it what real DynamoDB answers there.
package dynalite

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/proc"
	"github.com/buzzgate/buzzgate/pkg/ddbtable"
)

// EnvBinary names the environment variable that overrides where the dynalite
// script is (by default .tools/dynalite/node_modules/.bin/dynalite under the
// module root).
const EnvBinary = "BUZZGATE_DYNALITE"

// NotInstalled is the message of the error returned when the dynalite script
// cannot be found.
const NotInstalled = "dynalite is not installed: run `make tools` (make test installs it)"

// startTimeout bounds the wait for the server to accept connections.
const startTimeout = 20 * time.Second

// Server is a running dynalite process.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:<port>.
	Endpoint string

	proc *proc.Process
	out  *proc.SyncBuffer
}

// Start runs a dynalite server for the test and returns its endpoint. The
// server is stopped when the test ends. A missing dynalite fails the test
// (it is never skipped).
func Start(tb testing.TB) (endpoint string) {
	tb.Helper()
	s, err := Launch()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s.Endpoint
}

// Shared is one dynalite server for all the tests of a package, started
// by the first test that asks for its Endpoint (so that a run of tests that
// need none, a fuzz worker say, starts nothing) and stopped by Main:
//
//	var server dynalite.Shared
//	func TestMain(m *testing.M) { dynalite.Main(m, &server) }
//	func TestX(t *testing.T) { client := dynalite.Client(t, server.Endpoint(t)) }
type Shared struct {
	mu  sync.Mutex
	srv *Server
	err error

	table    string
	tableErr error
}

// Table creates a fresh table with the gateway's key schema
// (ddbtable.EnsureTable) on client and returns its name.
func Table(tb testing.TB, client *dynamodb.Client, prefix string) string {
	tb.Helper()
	table := TableName(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ddbtable.EnsureTable(ctx, client, table); err != nil {
		tb.Fatalf("create table %s: %v", table, err)
	}
	return table
}

// SharedTable is one table on the shared server for every test of the
// package that asks (tests that use fresh keys or ids can share it). It is
// created by the first test that asks.
func (s *Shared) SharedTable(tb testing.TB) string {
	tb.Helper()
	endpoint := s.Endpoint(tb)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == "" && s.tableErr == nil {
		s.table = TableName("shared")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s.tableErr = ddbtable.EnsureTable(ctx, NewClient(endpoint), s.table)
		cancel()
	}
	if s.tableErr != nil {
		tb.Fatalf("create table %s: %v", s.table, s.tableErr)
	}
	return s.table
}

// Endpoint starts the server if it is not running yet and returns its
// endpoint. A server that could not start fails every test that asks.
func (s *Shared) Endpoint(tb testing.TB) string {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil && s.err == nil {
		s.srv, s.err = Launch()
	}
	if s.err != nil {
		tb.Fatal(s.err)
	}
	return s.srv.Endpoint
}

// Output is what the server wrote so far, and how it ended if it did ("" if
// it was never started).
func (s *Shared) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return ""
	}
	out := s.srv.Output()
	select {
	case <-s.srv.proc.Exited():
		out += "\n(dynalite exited: " + s.srv.proc.Cmd.ProcessState.String() + ")"
	default:
	}
	return out
}

// Close stops the server if it was started.
func (s *Shared) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
	}
}

// Main is the TestMain of a package whose tests share s: it runs the
// tests, stops the server and exits with the tests' code.
func Main(m *testing.M, s *Shared) {
	code := m.Run()
	s.Close()
	os.Exit(code)
}

// Launch starts a dynalite server on a free port of 127.0.0.1 and waits until
// it accepts connections. The caller must Close it.
func Launch() (*Server, error) {
	script, err := Binary()
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("dynalite needs node on PATH: %w", err)
	}
	return proc.Retry(3, func() (*Server, error) { return launch(node, script) })
}

func launch(node, script string) (*Server, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(node, script,
		"--host", "127.0.0.1", "--port", port,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	out := &proc.SyncBuffer{Limit: 64 << 10} // for error messages
	cmd.Stdout, cmd.Stderr = out, out
	p, err := proc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("dynalite: %w", err)
	}
	if err := p.WaitReady(startTimeout, proc.Accepting(addr)); err != nil {
		p.Stop(0)
		return nil, fmt.Errorf("dynalite on %s: %w; output: %s", addr, err, out.String())
	}
	return &Server{Endpoint: "http://" + addr, proc: p, out: out}, nil
}

// Close kills the server (by its PID) and waits for it to exit.
func (s *Server) Close() { s.proc.Stop(0) }

// Output is what the server wrote to stdout and stderr so far.
func (s *Server) Output() string { return s.out.String() }

// Binary finds the dynalite script: $BUZZGATE_DYNALITE, or
// .tools/dynalite/node_modules/.bin/dynalite in the directory holding go.mod
// (found by walking up from the working directory).
func Binary() (string, error) {
	return proc.Tool(EnvBinary, filepath.Join(".tools", "dynalite", "node_modules", ".bin", "dynalite"), NotInstalled)
}

// Client builds a DynamoDB client for a dynalite endpoint: static dummy
// credentials, region us-east-1, the SDK's default retryer (override it with
// an optFn, e.g. o.RetryMaxAttempts = 1).
func Client(tb testing.TB, endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	tb.Helper()
	return NewClient(endpoint, optFns...)
}

// NewClient is Client for callers without a testing.TB (TestMain).
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("dynalite", "dynalite", ""),
		BaseEndpoint: aws.String(endpoint),
	}, optFns...)
}

var tableSeq struct {
	sync.Mutex
	n int
}

// TableName returns a table name unique within the process, prefixed.
func TableName(prefix string) string {
	tableSeq.Lock()
	defer tableSeq.Unlock()
	tableSeq.n++
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), tableSeq.n)
}
