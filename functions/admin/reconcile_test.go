//go:build integration

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/dynalite"
	"github.com/buzzgate/buzzgate/pkg/billing"
)

// reconcile reports what is due across projects, applies it with --apply,
// and finds nothing the second time.
func TestReconcile(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	// Reconcile looks at every project: a table of its own.
	client, _ := c.deps.dynamo(t.Context())
	c.env[EnvTable] = dynalite.Table(t, client, "reconcile")
	store := c.store()
	ctx := t.Context()
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	hold := func(project string, deadline time.Time) billing.Hold {
		h := billing.Hold{RequestID: newID("req"), Project: project, KeyID: "key_a", Model: "m", At: at, Deadline: deadline}
		if err := store.Hold(ctx, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	p1, p2 := newID("rp"), newID("rp")
	lost := hold(p1, at.Add(time.Minute))     // never priced: write off
	priced := hold(p2, at.Add(2*time.Minute)) // priced: settle
	running := hold(p1, at.Add(time.Hour))    // not due yet
	e := billing.Entry{RequestID: priced.RequestID, Project: p2, KeyID: "key_a", Model: "m", Provider: "prov", PromptTokens: 3, CompletionTokens: 4, CostNanos: 1_500_000_000, At: at}
	if err := store.Price(ctx, e); err != nil {
		t.Fatal(err)
	}
	now := at.Add(10 * time.Minute).Format(time.RFC3339)

	r := c.ok("reconcile", "--now", now)
	for _, want := range []string{"to settle", priced.RequestID, "to write off", lost.RequestID, "1 settled ($1.50", "1 written off", "pending"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report without --apply lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, running.RequestID) {
		t.Errorf("a hold not yet due is reported:\n%s", r.stdout)
	}
	if a, _ := store.Account(ctx, p2, "key_a"); a.SpentNanos != 0 {
		t.Fatalf("spent %d before --apply", a.SpentNanos)
	}

	r = c.ok("reconcile", "--as-of", now, "--apply")
	if !strings.Contains(r.stdout, "done: 1 settled") || !strings.Contains(r.stdout, "1 written off") {
		t.Errorf("--apply:\n%s", r.stdout)
	}
	if a, _ := store.Account(ctx, p2, "key_a"); a.SpentNanos != e.CostNanos || a.KeySpentNanos != e.CostNanos {
		t.Fatalf("after --apply: %+v, want %d spent", a, e.CostNanos)
	}
	r = c.ok("reconcile", "--now", now, "--apply")
	if !strings.Contains(r.stdout, "0 settled ($0.00") || !strings.Contains(r.stdout, "0 written off") {
		t.Errorf("second --apply:\n%s", r.stdout)
	}
	// A late Bill of the written-off request bills normally.
	late := billing.Entry{RequestID: lost.RequestID, Project: p1, KeyID: "key_a", Model: "m", CostNanos: 7, At: at}
	if err := store.Bill(ctx, late); err != nil {
		t.Fatal(err)
	}
	if a, _ := store.Account(ctx, p1, "key_a"); a.SpentNanos != 7 {
		t.Fatalf("late Bill: spent %d, want 7", a.SpentNanos)
	}
	if r := c.run("reconcile", "--now", "yesterday"); r.code != exitUsage {
		t.Errorf("bad --now: %v", r)
	}
}

// A hold the run could not settle is listed after the totals, with its
// project and the reason, for the operator to look at.
func TestReconcileListsSkipped(t *testing.T) {
	var out strings.Builder
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	r := billing.Reconciliation{Skipped: []billing.Skip{{RequestID: "req_1", Project: "proj", Reason: "entry req_1: cost is not a number"}}}
	if err := writeReconciliation(&out, at, true, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0 settled", "0 written off, 1 skipped", "skipped req_1 (project proj): entry req_1: cost is not a number"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
