package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// command is one subcommand.
type command struct {
	name     string
	synopsis string // the flags, after the name
	summary  string // one line, for the top-level usage
	about    string // a paragraph, for the command's usage
	examples []string
	// define registers the command's flags on fs and returns its action
	// (now is the clock, for defaults that depend on it).
	define func(fs *flag.FlagSet, now func() time.Time) action
}

// action is a command with its flags parsed: check validates them (a
// usageError), run does the work.
type action struct {
	check func() error
	run   func(ctx context.Context, e *env) error
}

// commands, in the order of the usage.
var commands = []*command{
	{
		name:     "create-project",
		synopsis: "--id ID [--balance USD]",
		summary:  "create a project, with a prepaid balance or unlimited",
		about: `Creates a project. With --balance it has that prepaid balance, which its
requests spend (402 insufficient_balance once it is spent); without, its
balance is unlimited. A project that exists is an error: set-balance changes
its balance.`,
		examples: []string{
			"admin create-project --id acme --balance 100",
			"admin create-project --id internal-tools",
		},
		define: defineCreateProject,
	},
	{
		name:     "issue-key",
		synopsis: "--project ID [--limit USD] [--rpm N] [--tpm N] [--budget USD --period day|week|month]",
		summary:  "issue an API key for a project (the key is printed once)",
		about: `Issues an API key for a project and prints it with its key id. The key is
printed this once and never again: the table keeps only its hash. With
--limit the key may spend at most that much (402 key_limit_reached then);
without, it has no limit of its own. --rpm, --tpm, --budget and --period
give it rate limits and a budget, as set-key-rates does.`,
		examples: []string{
			"admin issue-key --project acme",
			"admin issue-key --project acme --limit 25",
			"admin issue-key --project acme --rpm 60 --budget 5 --period day",
		},
		define: defineIssueKey,
	},
	{
		name:     "revoke-key",
		synopsis: "--key-id ID",
		summary:  "revoke an API key by its key id",
		about: `Revokes an API key by its key id (the key_... that issue-key printed).
Revoking twice is fine. A gateway instance that looked the key up recently
may accept it until its key cache forgets it (30s by default).`,
		examples: []string{
			"admin revoke-key --key-id key_0123456789abcdef",
		},
		define: defineRevokeKey,
	},
	{
		name:     "set-balance",
		synopsis: "--project ID (--usd N | --unlimited)",
		summary:  "set a project's remaining balance, or make it unlimited",
		about: `Sets what a project has left to spend from now on (what it spent so far
stays counted), or makes its balance unlimited. Requests in flight are
billed against the new balance.`,
		examples: []string{
			"admin set-balance --project acme --usd 250",
			"admin set-balance --project acme --usd 0        # stop it spending",
			"admin set-balance --project acme --unlimited",
		},
		define: defineSetBalance,
	},
	{
		name:     "set-limit",
		synopsis: "--project ID --key-id ID (--usd N | --none)",
		summary:  "set an API key's spend limit, or remove it",
		about: `Sets the most an API key may spend in total (its spend so far counts
against it), or removes its limit. The key must belong to the project.`,
		examples: []string{
			"admin set-limit --project acme --key-id key_0123456789abcdef --usd 50",
			"admin set-limit --project acme --key-id key_0123456789abcdef --none",
		},
		define: defineSetLimit,
	},
	{
		name:     "set-key-rates",
		synopsis: "--project ID --key-id ID [--rpm N] [--tpm N] [--budget USD --period day|week|month]",
		summary:  "set an issued API key's rate limits and budget",
		about: `Sets an issued key's requests and tokens per minute (0 or left out: none)
and its budget per UTC day, week or month (left out: none), replacing what
it had. Every instance sees them within the key cache's 30 seconds. A key
of the config file takes them from the config instead.`,
		examples: []string{
			"admin set-key-rates --project acme --key-id key_0123456789abcdef --rpm 60 --tpm 200000",
			"admin set-key-rates --project acme --key-id key_0123456789abcdef --budget 5 --period day",
		},
		define: defineSetKeyRates,
	},
	{
		name:     "set-project-rates",
		synopsis: "--project ID [--rpm N] [--tpm N] [--budget USD --period day|week|month]",
		summary:  "set a project's rate limits and budget",
		about: `Sets a project's requests and tokens per minute (0 or left out: none) and
its budget per UTC day, week or month (left out: none), replacing what it
had. A project whose config entry sets rpm, tpm or a budget keeps the
config's.`,
		examples: []string{
			"admin set-project-rates --project acme --rpm 600 --tpm 2000000 --budget 100 --period month",
		},
		define: defineSetProjectRates,
	},
	{
		name:     "show",
		synopsis: "--project ID [--key-id ID]",
		summary:  "show a project's balance and spend, and a key's spend and limit",
		about: `Shows a project's remaining balance and what it spent, in all and in the
current UTC day, week and month, and with --key-id the key's status, spend
and limit. With --config, the gateway's config file, also the budgets it
gives the project (and the key) and what is left of them in the current
period. Amounts are in US dollars.`,
		examples: []string{
			"admin show --project acme",
			"admin show --project acme --key-id key_0123456789abcdef",
		},
		define: defineShow,
	},
	{
		name:     "usage",
		synopsis: "--project ID [--from TIME] [--to TIME]",
		summary:  "a project's usage totals, by model and by key, over a time range",
		about: `Sums a project's billed requests accepted in [--from, --to): requests,
tokens and cost, in total, by model and by key. TIME is RFC 3339
(2025-06-01T00:00:00Z, 2025-06-01T09:00:00+02:00) or a date (2025-06-01,
midnight UTC). The default is the last 24 hours.`,
		examples: []string{
			"admin usage --project acme",
			"admin usage --project acme --from 2025-06-01 --to 2025-07-01",
			"admin usage --project acme --from 2025-06-01T08:00:00Z",
		},
		define: defineUsage,
	},
	{
		name:     "reconcile",
		synopsis: "[--apply] [--now TIME]",
		summary:  "report (and with --apply settle) the holds past their deadline, in every project",
		about: `Lists, across all projects, the requests whose hold is past its deadline:
the priced ones (their cost is known and not yet applied: "settle") and
the ones that never got a price ("write off": closed at zero cost, nothing
billed; a late bill of such a request still bills normally). With --apply
it settles and writes them off; without, it only reports. --now (or
--as-of; RFC 3339, default now) is the time the deadlines are compared
with. It is safe to run while the gateway runs, and twice at once: nothing
is billed twice. The gateway's sweep does the same on a schedule.`,
		examples: []string{
			"admin reconcile",
			"admin reconcile --apply",
			"admin reconcile --now 2025-06-01T12:00:00Z",
		},
		define: defineReconcile,
	},
}

func defineReconcile(fs *flag.FlagSet, now func() time.Time) action {
	apply := fs.Bool("apply", false, "settle and write off what is found (default: only report)")
	var at timeFlag
	fs.Var(&at, "now", "compare deadlines with this `TIME` (default: now)")
	fs.Var(&at, "as-of", "the same as --now (`TIME`)")
	return action{
		check: func() error {
			if !at.set {
				at.t = now()
			}
			return nil
		},
		run: func(ctx context.Context, e *env) error {
			r, err := e.store.Reconcile(ctx, at.t, *apply)
			if werr := writeReconciliation(e.stdout, at.t, *apply, r); werr != nil {
				return werr
			}
			if err != nil {
				return fmt.Errorf("the run stopped after what is listed above: %w", err)
			}
			return nil
		},
	}
}

// writeReconciliation prints one line per request and the totals.
func writeReconciliation(w io.Writer, at time.Time, applied bool, r billing.Reconciliation) error {
	verb := "to "
	if applied {
		verb = ""
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "action\tproject\tkey id\trequest id\tmodel\taccepted\tcost\n")
	var cost int64
	for _, en := range r.Settled {
		cost += en.CostNanos
		fmt.Fprintf(tw, "%ssettle\t%s\t%s\t%s\t%s\t%s\t%s\n", verb, en.Project, en.KeyID, en.RequestID, en.Model, en.At.UTC().Format(time.RFC3339), formatUSD(en.CostNanos))
	}
	for _, h := range r.WrittenOff {
		fmt.Fprintf(tw, "%swrite off\t%s\t%s\t%s\t%s\t%s\t%s\n", verb, h.Project, h.KeyID, h.RequestID, h.Model, h.At.UTC().Format(time.RFC3339), formatUSD(0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	what := "pending"
	if applied {
		what = "done"
	}
	if _, err := fmt.Fprintf(w, "as of %s, %s: %d settled (%s), %d written off, %d skipped\n", at.UTC().Format(time.RFC3339), what, len(r.Settled), formatUSD(cost), len(r.WrittenOff), len(r.Skipped)); err != nil {
		return err
	}
	// What could not be settled, left for the next run: the operator's to
	// look at.
	for _, sk := range r.Skipped {
		if _, err := fmt.Fprintf(w, "skipped %s (project %s): %s\n", sk.RequestID, sk.Project, sk.Reason); err != nil {
			return err
		}
	}
	return nil
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// flagSet returns the command's flags (with the common ones) and action,
// and where --create-table goes.
func (c *command) flagSet(now func() time.Time) (*flag.FlagSet, action, *bool) {
	fs := flag.NewFlagSet(prog+" "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints the errors and the usage
	fs.Usage = func() {}
	act := c.define(fs, now)
	createTable := fs.Bool("create-table", false, "create the table if it does not exist (local use: the SAM template creates it in AWS)")
	return fs, act, createTable
}

func defineCreateProject(fs *flag.FlagSet, _ func() time.Time) action {
	id := fs.String("id", "", "the project `ID` (required)")
	var balance usdFlag
	fs.Var(&balance, "balance", "the prepaid balance in `USD` (default: unlimited)")
	return action{
		check: func() error { return checkID("id", *id) },
		run: func(ctx context.Context, e *env) error {
			err := e.store.CreateProject(ctx, *id, balance.ptr())
			if errors.Is(err, billing.ErrProjectExists) {
				return fmt.Errorf("project %q exists (set-balance changes its balance)", *id)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "created project %s, balance %s\n", *id, formatBalance(balance.ptr()))
			return nil
		},
	}
}

func defineIssueKey(fs *flag.FlagSet, _ func() time.Time) action {
	project := fs.String("project", "", "the project `ID` (required)")
	var limit usdFlag
	fs.Var(&limit, "limit", "the key's spend limit in `USD` (default: none)")
	rf := rateFlags(fs)
	return action{
		check: func() error { return errors.Join(checkID("project", *project), rf.check()) },
		run: func(ctx context.Context, e *env) error {
			raw, rec, err := e.store.Issue(ctx, *project)
			if errors.Is(err, billing.ErrUnknownProject) {
				return unknownProject(*project)
			}
			if err != nil {
				return err
			}
			var setErr error
			if limit.set {
				setErr = e.store.SetKeyLimit(ctx, *project, rec.KeyID, limit.ptr())
			}
			rates := rf.rates()
			if setErr == nil && rates != (billing.Rates{}) {
				setErr = e.store.SetKeyRates(ctx, rec.KeyID, rates)
			}
			if setErr != nil {
				// The raw key was never shown, so the key cannot be used;
				// revoke it all the same, so no key without its limit or
				// rates is left behind.
				rerr := e.store.Revoke(ctx, rec.KeyID)
				state := "revoked"
				if rerr != nil {
					state = "not revoked either (" + rerr.Error() + ")"
				}
				return fmt.Errorf("key %s was issued but its limit or rates could not be set (%w); it is not shown and was %s: issue another", rec.KeyID, setErr, state)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "project\t%s\n", rec.Project)
			fmt.Fprintf(tw, "key id\t%s\n", rec.KeyID)
			fmt.Fprintf(tw, "limit\t%s\n", formatLimit(limit.ptr()))
			fmt.Fprintf(tw, "rates\t%s\n", formatRates(rates))
			fmt.Fprintf(tw, "api key\t%s\n", raw)
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "%s: the api key above is shown this once (the table keeps only its hash): store it now\n", prog)
			return nil
		},
	}
}

func defineRevokeKey(fs *flag.FlagSet, _ func() time.Time) action {
	keyID := fs.String("key-id", "", "the key `ID`, key_... (required)")
	return action{
		check: func() error { return checkID("key-id", *keyID) },
		run: func(ctx context.Context, e *env) error {
			k, err := e.keyByID(ctx, *keyID)
			if err != nil {
				return err
			}
			if err := e.store.Revoke(ctx, *keyID); err != nil {
				if errors.Is(err, billing.ErrUnknownKey) {
					return unknownKey(*keyID)
				}
				return err
			}
			fmt.Fprintf(e.stdout, "revoked key %s of project %s\n", *keyID, k.project)
			return nil
		},
	}
}

func defineSetBalance(fs *flag.FlagSet, _ func() time.Time) action {
	project := fs.String("project", "", "the project `ID` (required)")
	amount := defineUSDOrNone(fs, "the remaining balance in `USD`", "unlimited", "make the balance unlimited")
	return action{
		check: func() error {
			if err := checkID("project", *project); err != nil {
				return err
			}
			return amount.check()
		},
		run: func(ctx context.Context, e *env) error {
			if err := e.requireProject(ctx, *project); err != nil {
				return err
			}
			if err := e.store.SetBalance(ctx, *project, amount.usd.ptr()); err != nil {
				return err
			}
			a, err := e.store.Account(ctx, *project, "")
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "project %s: balance %s, spent %s\n", *project, formatBalance(a.BalanceNanos), formatUSD(a.SpentNanos))
			return nil
		},
	}
}

func defineSetLimit(fs *flag.FlagSet, _ func() time.Time) action {
	project := fs.String("project", "", "the project `ID` (required)")
	keyID := fs.String("key-id", "", "the key `ID`, key_... (required)")
	amount := defineUSDOrNone(fs, "the key's spend limit in `USD`", "none", "remove the key's limit")
	return action{
		check: func() error {
			if err := errors.Join(checkID("project", *project), checkID("key-id", *keyID)); err != nil {
				return err
			}
			return amount.check()
		},
		run: func(ctx context.Context, e *env) error {
			if err := e.requireProject(ctx, *project); err != nil {
				return err
			}
			if _, err := e.requireKey(ctx, *project, *keyID); err != nil {
				return err
			}
			if err := e.store.SetKeyLimit(ctx, *project, *keyID, amount.usd.ptr()); err != nil {
				return err
			}
			a, err := e.store.Account(ctx, *project, *keyID)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "key %s of project %s: limit %s, spent %s\n", *keyID, *project, formatLimit(a.KeyLimitNanos), formatUSD(a.KeySpentNanos))
			return nil
		},
	}
}

func defineSetProjectRates(fs *flag.FlagSet, _ func() time.Time) action {
	project := fs.String("project", "", "the project `ID` (required)")
	rf := rateFlags(fs)
	return action{
		check: func() error {
			return errors.Join(checkID("project", *project), rf.check())
		},
		run: func(ctx context.Context, e *env) error {
			if err := e.requireProject(ctx, *project); err != nil {
				return err
			}
			r := rf.rates()
			if err := e.store.SetProjectRates(ctx, *project, r); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "project %s: %s\n", *project, formatRates(r))
			return nil
		},
	}
}

// rateFlagSet is the flags of a rates command: --rpm, --tpm, --budget and
// --period.
type rateFlagSet struct {
	rpm, tpm *int64
	budget   *usdFlag
	period   *string
}

func rateFlags(fs *flag.FlagSet) rateFlagSet {
	rf := rateFlagSet{budget: &usdFlag{}}
	rf.rpm = fs.Int64("rpm", 0, "requests per minute, `N` (0: none)")
	rf.tpm = fs.Int64("tpm", 0, "tokens per minute, `N` (0: none)")
	fs.Var(rf.budget, "budget", "the budget per period in `USD`")
	rf.period = fs.String("period", "", "the budget's `period`: day, week or month (with --budget)")
	return rf
}

func (rf rateFlagSet) check() error {
	if *rf.rpm < 0 || *rf.tpm < 0 {
		return usagef("--rpm and --tpm must be >= 0")
	}
	if _, ok := billing.ParsePeriod(*rf.period); rf.budget.set != ok || (*rf.period != "" && !ok) {
		return usagef("--budget and --period go together; --period is day, week or month")
	}
	return nil
}

func (rf rateFlagSet) rates() billing.Rates {
	r := billing.Rates{RPM: *rf.rpm, TPM: *rf.tpm}
	if rf.budget.set {
		r.Budget = &catalog.Budget{Amount: billing.NanosToUSD(*rf.budget.ptr()), Period: *rf.period}
	}
	return r
}

func defineSetKeyRates(fs *flag.FlagSet, _ func() time.Time) action {
	project := fs.String("project", "", "the project `ID` (required)")
	keyID := fs.String("key-id", "", "the key `ID`, key_... (required)")
	rf := rateFlags(fs)
	return action{
		check: func() error {
			return errors.Join(checkID("project", *project), checkID("key-id", *keyID), rf.check())
		},
		run: func(ctx context.Context, e *env) error {
			if err := e.requireProject(ctx, *project); err != nil {
				return err
			}
			if _, err := e.requireKey(ctx, *project, *keyID); err != nil {
				return err
			}
			r := rf.rates()
			if err := e.store.SetKeyRates(ctx, *keyID, r); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "key %s of project %s: %s\n", *keyID, *project, formatRates(r))
			return nil
		},
	}
}

// formatRates is a key's rates and budget.
func formatRates(r billing.Rates) string {
	rate := func(n int64) string {
		if n == 0 {
			return "none"
		}
		return strconv.FormatInt(n, 10)
	}
	budget := "none"
	if b := r.Budget; b != nil {
		budget = fmt.Sprintf("%s a %s", formatUSD(billing.USDToNanos(b.Amount)), b.Period)
	}
	return fmt.Sprintf("rpm %s, tpm %s, budget %s", rate(r.RPM), rate(r.TPM), budget)
}

func defineShow(fs *flag.FlagSet, _ func() time.Time) action {
	project := fs.String("project", "", "the project `ID` (required)")
	keyID := fs.String("key-id", "", "also show this key's status, spend and limit (key `ID`, key_...)")
	config := fs.String("config", "", "the gateway's config `FILE`: also show the budgets it gives the project and the key, and what is left of them")
	return action{
		check: func() error {
			if err := checkID("project", *project); err != nil {
				return err
			}
			if *keyID != "" {
				return checkID("key-id", *keyID)
			}
			return nil
		},
		run: func(ctx context.Context, e *env) error {
			if err := e.requireProject(ctx, *project); err != nil {
				return err
			}
			status := ""
			if *keyID != "" {
				var err error
				if status, err = e.requireKey(ctx, *project, *keyID); err != nil {
					return err
				}
			}
			a, err := e.store.Account(ctx, *project, *keyID)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "project\t%s\n", *project)
			fmt.Fprintf(tw, "balance\t%s\n", formatBalance(a.BalanceNanos))
			fmt.Fprintf(tw, "spent\t%s\n", formatUSD(a.SpentNanos))
			fmt.Fprintf(tw, "rates\t%s\n", formatRates(a.ProjectRates))
			if *keyID != "" {
				fmt.Fprintf(tw, "key id\t%s\n", *keyID)
				fmt.Fprintf(tw, "key status\t%s\n", status)
				fmt.Fprintf(tw, "key spent\t%s\n", formatUSD(a.KeySpentNanos))
				limit := formatLimit(a.KeyLimitNanos)
				if a.KeyLimitNanos != nil {
					limit += fmt.Sprintf(" (%s left)", formatUSD(max(*a.KeyLimitNanos-a.KeySpentNanos, 0)))
				}
				fmt.Fprintf(tw, "key limit\t%s\n", limit)
				if kr, err := e.store.KeyByID(ctx, *keyID); err == nil || errors.Is(err, billing.ErrKeyRevoked) {
					fmt.Fprintf(tw, "key rates\t%s\n", formatRates(kr.Rates))
				}
			}
			now := e.now()
			for q := range billing.NumPeriods {
				line := formatUSD(a.PeriodSpent[q])
				if *keyID != "" {
					line += fmt.Sprintf(" (key %s)", formatUSD(a.KeyPeriodSpent[q]))
				}
				fmt.Fprintf(tw, "spent this %s\t%s, from %s\n", q, line, q.Start(now).Format(time.RFC3339))
			}
			if *config != "" {
				cfg, err := catalog.Load(*config)
				if err != nil {
					return err
				}
				var projectBudget, keyBudget *catalog.Budget
				if p, ok := cfg.Project(*project); ok {
					projectBudget = p.Budget
					for _, k := range p.Keys {
						if *keyID != "" && billing.ConfigKeyID(e.pepper, k.Key) == *keyID {
							keyBudget = k.Budget
						}
					}
				}
				fmt.Fprintf(tw, "budget\t%s\n", formatBudget(projectBudget, a.PeriodSpent, now))
				if *keyID != "" {
					fmt.Fprintf(tw, "key budget\t%s\n", formatBudget(keyBudget, a.KeyPeriodSpent, now))
				}
			}
			return tw.Flush()
		},
	}
}

func defineUsage(fs *flag.FlagSet, now func() time.Time) action {
	project := fs.String("project", "", "the project `ID` (required)")
	var from, to timeFlag
	fs.Var(&from, "from", "the start of the range, included (`TIME`; default: 24 hours before --to)")
	fs.Var(&to, "to", "the end of the range, excluded (`TIME`; default: now)")
	return action{
		check: func() error {
			if err := checkID("project", *project); err != nil {
				return err
			}
			if !to.set {
				to.t = now()
			}
			if !from.set {
				from.t = to.t.Add(-24 * time.Hour)
			}
			if !from.t.Before(to.t) {
				return usagef("--from %s is not before --to %s", from.t.UTC().Format(time.RFC3339Nano), to.t.UTC().Format(time.RFC3339Nano))
			}
			return nil
		},
		run: func(ctx context.Context, e *env) error {
			if err := e.requireProject(ctx, *project); err != nil {
				return err
			}
			t, err := e.store.Totals(ctx, *project, from.t, to.t)
			if err != nil {
				return err
			}
			return writeUsage(e.stdout, *project, from.t, to.t, t)
		},
	}
}

// usdOrNone is a required choice between an amount, --usd, and none, a
// flag such as --unlimited.
type usdOrNone struct {
	usd  usdFlag
	none *bool
	name string // the none flag's, with its dashes
}

// defineUSDOrNone defines --usd (usage) and the flag none (noneUsage).
func defineUSDOrNone(fs *flag.FlagSet, usage, none, noneUsage string) *usdOrNone {
	c := &usdOrNone{name: "--" + none}
	fs.Var(&c.usd, "usd", usage)
	c.none = fs.Bool(none, false, noneUsage)
	return c
}

// check checks that exactly one of the two is set.
func (c *usdOrNone) check() error {
	switch {
	case c.usd.set && *c.none:
		return usagef("--usd and %s exclude each other", c.name)
	case !c.usd.set && !*c.none:
		return usagef("one of --usd and %s is required", c.name)
	}
	return nil
}

func unknownProject(id string) error {
	return fmt.Errorf("unknown project %q (create-project creates it)", id)
}

func unknownKey(id string) error {
	return fmt.Errorf("unknown key id %q", id)
}

// formatBudget is a budget and what is left of it in the current period.
func formatBudget(b *catalog.Budget, spent [billing.NumPeriods]int64, now time.Time) string {
	if b == nil {
		return "none"
	}
	q, ok := billing.ParsePeriod(b.Period)
	if !ok {
		return "invalid period " + b.Period
	}
	amount := billing.USDToNanos(b.Amount)
	return fmt.Sprintf("%s a %s (%s left, renews %s)", formatUSD(amount), q, formatUSD(max(amount-spent[q], 0)), q.End(now).Format(time.RFC3339))
}
