// Command admin manages buzzgate's accounts and API keys in the gateway's
// DynamoDB table: it creates projects, issues and revokes keys, sets
// balances and key limits, and reports balances and usage. It is a
// command-line program for an operator's machine with AWS credentials (no
// HTTP surface, not deployed as a Lambda).
//
// Every command needs BUZZGATE_KEY_PEPPER, the gateway's key pepper: keys
// are stored as billing.HashKey(pepper, key), so a key issued under another
// pepper can never authenticate. The table is BUZZGATE_TABLE (default
// "buzzgate"); it must exist (the SAM template creates it) unless
// --create-table or BUZZGATE_CREATE_TABLE=true creates it (local use). The
// DynamoDB client comes from the AWS SDK's default config, so AWS_REGION,
// AWS_PROFILE and AWS_ENDPOINT_URL_DYNAMODB (dynalite, DynamoDB Local) work
// as usual.
//
// Exit status: 0 success; 1 the operation failed (a one-line message on
// stderr); 2 bad usage (an unknown command or flag, a missing or invalid
// value, no pepper), with the usage on stderr.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, deps{})
	stop()
	os.Exit(code)
}
