// Command invoke runs the gateway's Lambda bootstrap under the Runtime
// Interface Emulator, sends it sample API Gateway events one after another
// and prints each decoded response (status, headers, body). It is what
// `make invoke EVENT=events/<name>.json` runs.
//
//	go run ./internal/invoke -bootstrap bin/local/bootstrap events/chat-completion.json [more.json ...]
//
// With -store dynamodb (the default) it starts dynalite, creates the table
// (under Lambda the gateway does not: the SAM template does) and points the
// function at it; with -store memory the function keeps its records in
// memory. Either way every process it started is stopped by its PID before
// it exits. The function's own logs (JSON lines) go to stderr, the
// responses to stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/internal/rie"
	"github.com/buzzgate/buzzgate/pkg/ddbtable"
)

func main() {
	bootstrap := flag.String("bootstrap", "bin/local/bootstrap", "the function's bootstrap, built for this machine")
	store := flag.String("store", "dynamodb", "the idempotency store: dynamodb (on dynalite) or memory")
	quiet := flag.Bool("q", false, "do not copy the emulator's and the function's logs to stderr")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: invoke [flags] EVENT.json [EVENT.json ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var logs io.Writer = os.Stderr
	if *quiet {
		logs = nil
	}
	if err := run(ctx, *bootstrap, *store, flag.Args(), logs); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, bootstrap, store string, eventFiles []string, logs io.Writer) error {
	events := make([][]byte, len(eventFiles))
	for i, f := range eventFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		events[i] = b
	}
	env := []string{"AWS_LAMBDA_FUNCTION_NAME=buzzgate-api", "AWS_LAMBDA_FUNCTION_TIMEOUT=900"}
	switch store {
	case "memory":
		env = append(env, "BUZZGATE_STORE=memory")
	case "dynamodb":
		db, err := dynalite.Launch()
		if err != nil {
			return err
		}
		defer db.Close()
		const table = "buzzgate"
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = ddbtable.EnsureTable(tctx, dynalite.NewClient(db.Endpoint), table)
		cancel()
		if err != nil {
			return fmt.Errorf("create table %s on dynalite: %w", table, err)
		}
		env = append(env,
			"BUZZGATE_STORE=dynamodb",
			"BUZZGATE_TABLE="+table,
			"AWS_ENDPOINT_URL_DYNAMODB="+db.Endpoint,
			"AWS_REGION=us-east-1",
			"AWS_ACCESS_KEY_ID=dynalite",
			"AWS_SECRET_ACCESS_KEY=dynalite",
		)
	default:
		return fmt.Errorf("-store %q: want dynamodb or memory", store)
	}
	emu, err := rie.Start(rie.Options{Bootstrap: bootstrap, Env: env, Log: logs})
	if err != nil {
		return err
	}
	defer emu.Close()

	for i, ev := range events {
		raw, err := emu.Invoke(ctx, ev)
		if err != nil {
			return fmt.Errorf("%s: %w", eventFiles[i], err)
		}
		resp, err := rie.Decode(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", eventFiles[i], err)
		}
		printResponse(os.Stdout, eventFiles[i], resp)
	}
	return nil
}

// printResponse writes the response as an HTTP client would show it.
func printResponse(w io.Writer, name string, r *rie.Response) {
	fmt.Fprintf(w, "== %s\n", name)
	fmt.Fprintf(w, "prelude: %s\n", r.Prelude)
	fmt.Fprintf(w, "HTTP %d\n", r.StatusCode)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range r.Header[k] {
			fmt.Fprintf(w, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintln(w)
	body := string(r.Body)
	fmt.Fprint(w, body)
	if !strings.HasSuffix(body, "\n") {
		fmt.Fprintln(w)
	}
}
