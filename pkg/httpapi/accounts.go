package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

func billingUnavailable(err error) error { return gateway.BillingUnavailable(err) }

// feedbackBody is POST /api/v1/feedback.
type feedbackBody struct {
	RequestID string   `json:"request_id"`
	EndUser   string   `json:"end_user"`
	Score     *float64 `json:"score"`
	Label     string   `json:"label"`
	Comment   string   `json:"comment"`
}

const (
	maxFeedbackField   = 256
	maxFeedbackComment = 4096
)

// ledgerCaller authenticates a request to an endpoint that reads or
// writes the ledger; when ok is false, the error is written.
func (s *Server) ledgerCaller(w *clientapi.Recorder, r *http.Request) (p *principal, ok bool) {
	p, err := s.authenticate(r)
	if err != nil {
		clientapi.WriteError(w, err)
		return nil, false
	}
	if s.accounts.Ledger == nil {
		clientapi.WriteError(w, billingUnavailable(errors.New("no ledger")))
		return nil, false
	}
	return p, true
}

// feedback records feedback on an answer of the caller's project, by its
// x-request-id and the end user: a natural-key upsert on (request_id,
// end_user), so sending it twice is harmless, with or without an
// Idempotency-Key.
func (s *Server) feedback(w *clientapi.Recorder, r *http.Request) {
	p, ok := s.ledgerCaller(w, r)
	if !ok {
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		clientapi.WriteError(w, err)
		return
	}
	var fb feedbackBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fb); err != nil {
		clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "", "the body must be a JSON object with request_id, end_user and optional score, label, comment"))
		return
	}
	for _, f := range []struct {
		name, value string
		max         int
		required    bool
	}{{"request_id", fb.RequestID, maxFeedbackField, true}, {"end_user", fb.EndUser, maxFeedbackField, true},
		{"label", fb.Label, maxFeedbackField, false}, {"comment", fb.Comment, maxFeedbackComment, false}} {
		if (f.required && f.value == "") || len(f.value) > f.max || !utf8.ValidString(f.value) {
			clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, f.name, "%s must be a string of at most %d bytes", f.name, f.max))
			return
		}
	}
	// Feedback is only taken on the caller's own answers.
	e, err := s.accounts.Ledger.Entry(r.Context(), fb.RequestID)
	switch {
	case errors.Is(err, billing.ErrNotFound) || (err == nil && e.Project != p.Project.ID):
		clientapi.WriteError(w, llm.Errorf(llm.CodeNotFound, "request_id", "no answer with that request_id in this project"))
		return
	case err != nil:
		clientapi.WriteError(w, billingUnavailable(err))
		return
	}
	err = s.accounts.Ledger.Feedback(r.Context(), billing.Feedback{
		RequestID: fb.RequestID, EndUser: fb.EndUser, Score: fb.Score, Label: fb.Label, Comment: fb.Comment,
	})
	if err != nil {
		if errors.Is(err, billing.ErrInvalid) {
			clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "", "invalid feedback"))
			return
		}
		clientapi.WriteError(w, billingUnavailable(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "feedback", "request_id": fb.RequestID, "end_user": fb.EndUser, "recorded": true})
}

type usageJSON struct {
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Cost             llm.USD `json:"cost"`
}

// periodJSON is the spend of the current UTC day, week or month: the
// project's and the calling key's.
type periodJSON struct {
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Spent    llm.USD   `json:"spent"`
	KeySpent llm.USD   `json:"key_spent"`
}

// budgetJSON is a budget that applies to the caller (the project's, the
// calling key's) and what is left of it in the current period.
type budgetJSON struct {
	Scope    string    `json:"scope"`
	Period   string    `json:"period"`
	Amount   llm.USD   `json:"amount"`
	Spent    llm.USD   `json:"spent"`
	Left     llm.USD   `json:"left"`
	RenewsAt time.Time `json:"renews_at"`
}

// balanceJSON is the project's prepaid balance: what remains of it
// (Balance, null when the project is unlimited; below zero after the
// requests in flight when it ran out were billed) and everything the
// project has spent.
type balanceJSON struct {
	Balance *llm.USD `json:"balance"`
	Spent   llm.USD  `json:"spent"`
}

// keyLimitJSON is the calling key's spend limit (null: none), everything
// the key has spent, and what is left of the limit (null when there is no
// limit; 0 once the limit is reached), as a budget's left is.
type keyLimitJSON struct {
	ID    string   `json:"id"`
	Limit *llm.USD `json:"limit"`
	Spent llm.USD  `json:"spent"`
	Left  *llm.USD `json:"left"`
}

func usdOf(nanos *int64) *llm.USD {
	if nanos == nil {
		return nil
	}
	u := llm.USD(billing.NanosToUSD(*nanos))
	return &u
}

func toAccountJSON(a billing.Account, keyID string) (balanceJSON, keyLimitJSON) {
	k := keyLimitJSON{ID: keyID, Limit: usdOf(a.KeyLimitNanos), Spent: llm.USD(billing.NanosToUSD(a.KeySpentNanos))}
	if a.KeyLimitNanos != nil {
		left := max(*a.KeyLimitNanos-a.KeySpentNanos, 0)
		k.Left = usdOf(&left)
	}
	return balanceJSON{Balance: usdOf(a.BalanceNanos), Spent: llm.USD(billing.NanosToUSD(a.SpentNanos))}, k
}

func toUsageJSON(u billing.Usage) usageJSON {
	return usageJSON{Requests: u.Requests, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, Cost: llm.USD(billing.NanosToUSD(u.CostNanos))}
}

// Bounds of GET /api/v1/usage: one call reads the ledger entries of at
// most maxUsageRange, and at most maxUsageLimit of them (a page; the next
// one from next_cursor).
const (
	maxUsageRange = 366 * 24 * time.Hour
	maxUsageLimit = 10_000
)

// usageCursor is next_cursor: the range it pages through and where its
// next page starts, as unpadded base64url JSON.
type usageCursor struct {
	From  time.Time `json:"f"`
	To    time.Time `json:"t"`
	Shard int       `json:"s"`
	After string    `json:"a,omitempty"`
}

func (c usageCursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeUsageCursor(v string) (usageCursor, bool) {
	var c usageCursor
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(v) > 1024 {
		return c, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return c, dec.Decode(&c) == nil && !c.From.IsZero() && !c.To.IsZero()
}

// usage serves the calling project's totals by model and by key over
// [from, to) (RFC 3339; default the last 24 hours; at most maxUsageRange),
// read from the ledger a page of at most limit entries at a time (default
// and at most maxUsageLimit): has_more and next_cursor say whether another
// page follows and how to ask for it (the cursor carries the range). It is
// admitted as a request (a max_in_flight slot, one request of the rpm) and
// never billed.
func (s *Server) usage(w *clientapi.Recorder, r *http.Request) {
	p, ok := s.ledgerCaller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var cur usageCursor
	if v := q.Get("cursor"); v != "" {
		c, ok := decodeUsageCursor(v)
		if !ok {
			clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "cursor", "cursor must be a next_cursor of this endpoint, as it was sent"))
			return
		}
		cur = c
	}
	to, from := s.now(), time.Time{}
	for _, f := range []struct {
		name       string
		dst        *time.Time
		fromCursor time.Time
	}{{"to", &to, cur.To}, {"from", &from, cur.From}} {
		v := q.Get(f.name)
		switch {
		case v == "" && !f.fromCursor.IsZero():
			*f.dst = f.fromCursor
		case v == "":
		default:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, f.name, "%s must be an RFC 3339 time such as 2026-11-29T00:00:00Z", f.name))
				return
			}
			if !f.fromCursor.IsZero() && !t.Equal(f.fromCursor) {
				clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "cursor", "the cursor pages through another range: send it alone, or with the from and to it was made for"))
				return
			}
			*f.dst = t
		}
	}
	if from.IsZero() {
		from = to.Add(-24 * time.Hour)
	}
	limit := maxUsageLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxUsageLimit {
			clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "limit", "limit must be a whole number from 1 to %d", maxUsageLimit))
			return
		}
		limit = n
	}
	// The answer names both times in UTC, in JSON, which has no year
	// outside 0000 to 9999: a time that leaves them (an offset, or the
	// default from, a day before to) is the caller's mistake, not a 500.
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"from", from}, {"to", to}} {
		if y := f.t.UTC().Year(); y < 0 || y > 9999 {
			clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, f.name, "%s must fall within the years 0000 to 9999 in UTC (from defaults to 24 hours before to)", f.name))
			return
		}
	}
	if !from.Before(to) {
		clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "from", "from must be before to"))
		return
	}
	if to.Sub(from) > maxUsageRange {
		clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "from", "from must be at most 366 days before to; ask for a longer time in several ranges"))
		return
	}
	adm, err := s.svc.AdmitFree(r.Context(), &p.Caller, nil)
	if err != nil {
		clientapi.WriteError(w, err)
		return
	}
	defer adm.Release()
	for k, v := range adm.Header {
		w.Header().Set(k, v)
	}
	tot, next, done, err := s.accounts.Ledger.TotalsPage(r.Context(), p.Project.ID, from, to, limit, billing.TotalsCursor{Shard: cur.Shard, After: cur.After})
	switch {
	case errors.Is(err, billing.ErrInvalid):
		clientapi.WriteError(w, llm.Errorf(llm.CodeInvalidRequest, "cursor", "cursor must be a next_cursor of this endpoint, as it was sent"))
		return
	case err != nil:
		clientapi.WriteError(w, billingUnavailable(err))
		return
	}
	var nextCursor *string
	if !done {
		c := usageCursor{From: from, To: to, Shard: next.Shard, After: next.After}.encode()
		nextCursor = &c
	}
	// The account admission read (seeded as this one is) serves when it
	// has one.
	var acct billing.Account
	if adm.Account != nil {
		acct = *adm.Account
	} else if acct, err = s.svc.Account(r.Context(), &p.Caller); err != nil {
		clientapi.WriteError(w, err)
		return
	}
	bal, keyLimit := toAccountJSON(acct, p.BillingKeyID)
	out := struct {
		Object  string                `json:"object"`
		Project string                `json:"project"`
		From    time.Time             `json:"from"`
		To      time.Time             `json:"to"`
		Total   usageJSON             `json:"total"`
		ByModel map[string]usageJSON  `json:"by_model"`
		ByKey   map[string]usageJSON  `json:"by_key"`
		Periods map[string]periodJSON `json:"periods"`
		Budgets []budgetJSON          `json:"budgets"`
		// Balance and Key are the project's prepaid balance and the
		// calling key's spend limit, as the 402 decision reads them now
		// (the same on every page).
		Balance balanceJSON  `json:"balance"`
		Key     keyLimitJSON `json:"key"`
		// HasMore: the range holds entries past this page, which
		// next_cursor asks for; the totals above are this page's.
		HasMore    bool    `json:"has_more"`
		NextCursor *string `json:"next_cursor"`
	}{Object: "usage", Project: p.Project.ID, From: from.UTC(), To: to.UTC(), Total: toUsageJSON(tot.Total), HasMore: !done, NextCursor: nextCursor,
		Balance: bal, Key: keyLimit, ByModel: map[string]usageJSON{}, ByKey: map[string]usageJSON{}, Periods: map[string]periodJSON{}, Budgets: []budgetJSON{}}
	now := s.now()
	for q := range billing.NumPeriods {
		out.Periods[q.String()] = periodJSON{Start: q.Start(now), End: q.End(now),
			Spent: llm.USD(billing.NanosToUSD(acct.PeriodSpent[q])), KeySpent: llm.USD(billing.NanosToUSD(acct.KeyPeriodSpent[q]))}
	}
	for _, b := range []struct {
		scope  string
		budget *catalog.Budget
		spent  [billing.NumPeriods]int64
	}{{"project", gateway.ProjectRates(p.Project, acct).Budget, acct.PeriodSpent}, {"key", p.KeyRates.Budget, acct.KeyPeriodSpent}} {
		if b.budget == nil {
			continue
		}
		q, _ := billing.ParsePeriod(b.budget.Period)
		left := max(billing.USDToNanos(b.budget.Amount)-b.spent[q], 0)
		out.Budgets = append(out.Budgets, budgetJSON{Scope: b.scope, Period: q.String(), Amount: llm.USD(b.budget.Amount),
			Spent: llm.USD(billing.NanosToUSD(b.spent[q])), Left: llm.USD(billing.NanosToUSD(left)), RenewsAt: q.End(now)})
	}
	for m, u := range tot.ByModel {
		out.ByModel[m] = toUsageJSON(u)
	}
	for k, u := range tot.ByKey {
		out.ByKey[k] = toUsageJSON(u)
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		clientapi.WriteError(w, err)
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
