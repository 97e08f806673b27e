package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
	"github.com/buzzgate/buzzgate/pkg/ddbtable"
)

// prog is the program's name in messages and usage.
const prog = "admin"

// Environment variables.
const (
	// EnvKeyPepper is the gateway's key pepper (required).
	EnvKeyPepper = "BUZZGATE_KEY_PEPPER"
	// EnvTable names the DynamoDB table (default DefaultTable).
	EnvTable = "BUZZGATE_TABLE"
	// EnvCreateTable: "true" creates a missing table (as --create-table
	// does); "false" or unset does not.
	EnvCreateTable = "BUZZGATE_CREATE_TABLE"

	DefaultTable = "buzzgate"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the operation failed
	exitUsage = 2 // bad usage
)

// deps are run's dependencies from outside; the zero value is the real
// thing.
type deps struct {
	// dynamo returns the DynamoDB client; nil: the AWS SDK's default
	// config (the process environment, shared config files, ...).
	dynamo func(ctx context.Context) (*dynamodb.Client, error)
	// now is the clock; nil: time.Now.
	now func() time.Time
}

// usageError is an error of the command line: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// env is what a command runs with: the store and the outputs.
type env struct {
	client *dynamodb.Client
	table  string
	store  *dynamoledger.Store
	pepper []byte
	now    func() time.Time
	stdout io.Writer
	stderr io.Writer
}

// run is the program: it parses args (without the program name), runs the
// command and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, d deps) int {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.dynamo == nil {
		d.dynamo = defaultDynamo
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: no command\n\n", prog)
		topUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		topUsage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			topUsage(stdout)
			return exitOK
		}
		c := lookup(args[1])
		if c == nil || len(args) > 2 {
			fmt.Fprintf(stderr, "%s help: unknown command %q\n\n", prog, strings.Join(args[1:], " "))
			topUsage(stderr)
			return exitUsage
		}
		fs, _, _ := c.flagSet(d.now)
		cmdUsage(stdout, c, fs)
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", prog, name)
		topUsage(stderr)
		return exitUsage
	}

	fs, act, createTableFlag := c.flagSet(d.now)
	bad := func(err error) int {
		// The flag package names flags with one dash; the usage, with two.
		msg := strings.NewReplacer("flag -", "flag --", "defined: -", "defined: --").Replace(err.Error())
		fmt.Fprintf(stderr, "%s %s: %s\n\n", prog, c.name, oneLine(msg))
		cmdUsage(stderr, c, fs)
		return exitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cmdUsage(stdout, c, fs)
			return exitOK
		}
		return bad(err)
	}
	if fs.NArg() > 0 {
		return bad(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if err := act.check(); err != nil {
		return bad(err)
	}

	pepper := getenv(EnvKeyPepper)
	if pepper == "" {
		fmt.Fprintf(stderr, "%s: %s is not set: set it to the gateway's key pepper (keys are stored hashed with it, and a key hashed with another pepper can never authenticate)\n", prog, EnvKeyPepper)
		return exitUsage
	}
	table := getenv(EnvTable)
	if table == "" {
		table = DefaultTable
	}
	createTable := *createTableFlag
	switch v := getenv(EnvCreateTable); v {
	case "", "false":
	case "true":
		createTable = true
	default:
		fmt.Fprintf(stderr, "%s: %s=%q: want true or false\n", prog, EnvCreateTable, v)
		return exitUsage
	}

	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s %s: %s\n", prog, c.name, oneLine(describe(err, table)))
		return exitError
	}
	client, err := d.dynamo(ctx)
	if err != nil {
		return fail(err)
	}
	if createTable {
		if err := ddbtable.EnsureTable(ctx, client, table); err != nil {
			return fail(fmt.Errorf("create table %q: %w", table, err))
		}
	}
	e := &env{
		client: client,
		table:  table,
		store:  dynamoledger.New(client, table, dynamoledger.Options{Pepper: []byte(pepper), Now: d.now}),
		pepper: []byte(pepper),
		now:    d.now,
		stdout: stdout,
		stderr: stderr,
	}
	if err := act.run(ctx, e); err != nil {
		return fail(err)
	}
	return exitOK
}

// defaultDynamo builds the DynamoDB client from the AWS SDK's default
// config.
func defaultDynamo(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION (or a profile with a region)")
	}
	return dynamodb.NewFromConfig(cfg), nil
}

// describe words the errors an operator can act on.
func describe(err error, table string) string {
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return fmt.Sprintf("DynamoDB table %q does not exist (the SAM stack creates it; locally pass --create-table or set %s=true): %v", table, EnvCreateTable, err)
	case errors.Is(err, context.Canceled):
		return "interrupted: " + err.Error()
	}
	return err.Error()
}

// oneLine keeps a message on one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// checkID checks a project or key id flag: not empty, at most
// billing.MaxIDBytes, valid UTF-8 without whitespace or control characters
// (as the config's project ids).
func checkID(flagName, v string) error {
	if v == "" {
		return usagef("--%s is required", flagName)
	}
	if len(v) > billing.MaxIDBytes {
		return usagef("--%s: over %d bytes", flagName, billing.MaxIDBytes)
	}
	if !utf8.ValidString(v) || strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return usagef("--%s %q: must be UTF-8 without whitespace or control characters", flagName, v)
	}
	return nil
}
