package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// maxUSD bounds an amount on the command line (a billion dollars: far from
// where int64 nano-dollars saturate, 9.2e9).
const maxUSD = 1e9

// usdFlag is an optional amount of US dollars, >= 0.
type usdFlag struct {
	nanos int64
	set   bool
}

func (f *usdFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return formatUSD(f.nanos)
}

func (f *usdFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return errors.New("not an amount of US dollars (e.g. 25 or 0.50)")
	case v < 0:
		return errors.New("must not be negative")
	case v > maxUSD:
		return fmt.Errorf("over %s", formatUSD(billing.USDToNanos(maxUSD)))
	}
	f.nanos, f.set = billing.USDToNanos(v), true
	return nil
}

// ptr is the amount, nil when the flag is not set.
func (f *usdFlag) ptr() *int64 {
	if !f.set {
		return nil
	}
	n := f.nanos
	return &n
}

// timeFlag is an optional RFC 3339 time, or a date (midnight UTC).
type timeFlag struct {
	t   time.Time
	set bool
}

func (f *timeFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		if t, err = time.Parse(time.DateOnly, s); err != nil {
			return errors.New("want an RFC 3339 time (2025-06-01T08:00:00Z) or a date (2025-06-01)")
		}
	}
	f.t, f.set = t, true
	return nil
}

// formatUSD writes nano-dollars as dollars, exactly: at least two
// decimals, more where there are more ($0.000014), thousands separated
// ($1,234.50).
func formatUSD(n int64) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign = "-"
		u = -u // two's complement: right for math.MinInt64 too
	}
	whole, frac := u/billing.NanosPerUSD, u%billing.NanosPerUSD
	w := strconv.FormatUint(whole, 10)
	var b strings.Builder
	for i, c := range w {
		if i > 0 && (len(w)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	f := strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
	for len(f) < 2 {
		f += "0"
	}
	return sign + "$" + b.String() + "." + f
}

// formatBalance writes a remaining balance (nil: unlimited).
func formatBalance(n *int64) string {
	if n == nil {
		return "unlimited"
	}
	return formatUSD(*n) + " remaining"
}

// formatLimit writes a key limit (nil: none).
func formatLimit(n *int64) string {
	if n == nil {
		return "none"
	}
	return formatUSD(*n)
}

// writeUsage writes a project's totals over [from, to): a table of the
// total, then by model and by key, each by cost (highest first).
func writeUsage(w io.Writer, project string, from, to time.Time, t billing.Totals) error {
	fmt.Fprintf(w, "usage of project %s from %s to %s\n", project,
		from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	if t.Total.Requests == 0 {
		fmt.Fprintln(w, "no billed requests")
		return nil
	}
	byCost := func(m map[string]billing.Usage) []string {
		return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
			return cmp.Or(cmp.Compare(m[b].CostNanos, m[a].CostNanos), strings.Compare(a, b))
		})
	}
	models, keys := byCost(t.ByModel), byCost(t.ByKey)
	label := func(name string) string {
		if name == "" {
			return "(none)"
		}
		return name
	}
	// The first column is padded here, so that the tabwriter aligns the
	// numbers right and the names left.
	width := len("by model")
	for _, name := range slices.Concat(models, keys) {
		width = max(width, 2+len(label(name)))
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\n%-*s\trequests\tprompt tokens\tcompletion tokens\tcost\t\n", width, "")
	row := func(name string, u billing.Usage) {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%s\t\n", width, name, u.Requests, u.PromptTokens, u.CompletionTokens, formatUSD(u.CostNanos))
	}
	row("total", t.Total)
	fmt.Fprintf(tw, "%-*s\t\t\t\t\t\n", width, "by model")
	for _, name := range models {
		row("  "+label(name), t.ByModel[name])
	}
	fmt.Fprintf(tw, "%-*s\t\t\t\t\t\n", width, "by key")
	for _, name := range keys {
		row("  "+label(name), t.ByKey[name])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " \n")); err != nil {
			return err
		}
	}
	return nil
}

// topUsage writes the program's usage.
func topUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: %[1]s <command> [flags]
       %[1]s <command> --help

Manages buzzgate's projects, API keys, balances and key limits in the
gateway's DynamoDB table, and reports usage. It runs on an operator's machine
with AWS credentials.

Commands:
`, prog)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, `
Environment:
  %[2]s    required: the gateway's key pepper, byte for byte (keys
                         are stored as HMAC-SHA256(pepper, key): a key hashed
                         with another pepper can never authenticate)
  %[3]s         the DynamoDB table (default %[4]q)
  %[5]s  true: create the table if it does not exist (local use;
                         as --create-table)
  AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ...: the AWS SDK's own
                         settings (AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000
                         for dynalite or DynamoDB Local)

Amounts are US dollars (25, 0.50); the table keeps them in nano-dollars.

Exit status: 0 done; 1 the operation failed (a one-line message on stderr);
2 bad usage (unknown command or flag, missing or invalid value, no pepper).

Examples:
  export %[2]s=...        # the gateway's pepper
  %[1]s create-project --id acme --balance 100
  %[1]s issue-key --project acme --limit 25
  %[1]s show --project acme --key-id key_0123456789abcdef
  %[1]s usage --project acme --from 2025-06-01 --to 2025-07-01
  AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 AWS_REGION=us-east-1 \
    %[1]s create-project --create-table --id dev
`, prog, EnvKeyPepper, EnvTable, DefaultTable, EnvCreateTable)
}

// cmdUsage writes a command's usage.
func cmdUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s %s %s\n\n%s\n\nFlags:\n", prog, c.name, c.synopsis, c.about)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, name, usage)
	})
	fmt.Fprintf(tw, "  -h, --help\tthis help\n")
	_ = tw.Flush()
	fmt.Fprintf(w, "\nExamples:\n")
	for _, ex := range c.examples {
		fmt.Fprintf(w, "  %s\n", ex)
	}
	fmt.Fprintf(w, "\nEnvironment: %s (required), %s (default %q),\n%s and the AWS SDK's settings: see `%s --help`.\n", EnvKeyPepper, EnvTable, DefaultTable, EnvCreateTable, prog)
}
