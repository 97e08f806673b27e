// Package prom is the Prometheus sink of the gateway's metrics: the same
// requests pkg/metrics writes as CloudWatch EMF lines, kept as counters and
// histograms in a registry of their own and served in Prometheus' text
// format (Handler), with the Go runtime's and the process's collectors.
//
// Labels hold only names the config or the gateway itself defines (client
// APIs, provider names, upstream APIs, project ids, translated field
// names, reasons, HTTP statuses): never a key, a request id, a prompt or a
// model name a client sent, so the number of series stays bounded.
package prom

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/metrics"
)

// Def describes one metric the sink registers: the docs' table is made
// from these (docs/operations.md#prometheus).
type Def struct {
	Name   string
	Type   string // "counter" or "histogram"
	Labels []string
	// Help is the metric's HELP text; CloudWatch names the EMF metrics it
	// mirrors.
	Help, CloudWatch string
}

// The metrics, in the order of the docs' table.
var (
	defRequests = Def{"buzzgate_requests_total", "counter", []string{"api", "status"},
		"Requests to a generation endpoint, by client API (chat, messages, responses) and HTTP status.",
		"`Requests`; `Errors5xx` is `status` 500 and above"}
	defDuration = Def{"buzzgate_request_duration_seconds", "histogram", []string{"api"},
		"Duration of requests to a generation endpoint, whole answer included.",
		"`Latency`"}
	defTTFT = Def{"buzzgate_time_to_first_token_seconds", "histogram", []string{"provider"},
		"Time to the answering provider's first output.",
		"`TimeToFirstToken`"}
	defProviderCalls = Def{"buzzgate_provider_calls_total", "counter", []string{"provider", "outcome"},
		"Provider calls by outcome: answered, error (failed), config_error (failed for the provider's configuration).",
		"`ProviderErrors` is `error` plus `config_error`; `ProviderConfigErrors` is `config_error`"}
	defFallbacks = Def{"buzzgate_fallbacks_total", "counter", nil,
		"Requests answered by a later route (depth above 0).",
		"`Fallbacks`"}
	defRouteDepth = Def{"buzzgate_route_depth", "histogram", nil,
		"The answering route's place in the order (0 = first), per answered request.",
		"`RouteDepth`"}
	defReplays = Def{"buzzgate_replays_total", "counter", nil,
		"Answers served from an idempotency record rather than a provider call.",
		"`Replays`"}
	defIdemRefusals = Def{"buzzgate_idempotency_refusals_total", "counter", []string{"reason"},
		"Requests refused with 409 by the idempotency layer: conflict, replay_unavailable, in_progress.",
		"`IdempotencyConflicts`, `ReplayUnavailable`, `IdempotencyInProgress`"}
	defStoreErrors = Def{"buzzgate_idempotency_store_errors_total", "counter", nil,
		"Requests that could not reach the idempotency store.",
		"`IdempotencyStoreErrors`"}
	defCost = Def{"buzzgate_cost_usd_total", "counter", nil,
		"Metered cost of the answers, in USD.",
		"`Cost`"}
	defPairs = Def{"buzzgate_protocol_pairs_total", "counter", []string{"api", "upstream_api", "pass_through"},
		"Requests a provider answered, by client API, the provider's api, and whether they passed through untranslated.",
		"`PairRequests`; `PassThrough` is `pass_through=\"true\"`"}
	defDropped = Def{"buzzgate_dropped_fields_total", "counter", []string{"api", "field"},
		"Fields a translation left out (named in x-gateway-dropped).",
		"`DroppedFields`"}
	defProjectRequests = Def{"buzzgate_project_requests_total", "counter", []string{"project"},
		"Requests of an authenticated project, answered or refused.",
		"`ProjectRequests`"}
	defProjectCost = Def{"buzzgate_project_cost_usd_total", "counter", []string{"project"},
		"A project's spend in USD: each answer's cost.",
		"`ProjectCost`"}
	defRefusals = Def{"buzzgate_admission_refusals_total", "counter", []string{"project", "reason"},
		"New requests refused for a project's money or rate limits: budget (402 budget_exceeded), balance (402 insufficient_balance, key_limit_reached), rate_limit (429 rate_limited).",
		"`BudgetRefusals`, `BalanceRefusals`, `RateLimited`"}
	defSecretRefresh = Def{"buzzgate_secret_refresh_failures_total", "counter", nil,
		"Reads of the provider secret that failed after start-up.",
		"`SecretRefreshFailures`"}
	defReconcileRuns = Def{"buzzgate_reconcile_runs_total", "counter", []string{"outcome"},
		"Runs of the local server's reconciler: ok, or failed (stopped with an error).",
		"the sweep function's runs (its `Errors` for `failed`)"}
	defReconcileHolds = Def{"buzzgate_reconcile_holds_total", "counter", []string{"result"},
		"Holds the reconciler settled (billed), wrote off at zero, or skipped for the next run.",
		"`SweepSettled`, `SweepWrittenOff`, `SweepSkipped`"}
	defReconcileCost = Def{"buzzgate_reconcile_settled_cost_usd_total", "counter", nil,
		"What the reconciler's settled bills came to, in USD.",
		"`SweepSettledCost`"}
	defReconcileDuration = Def{"buzzgate_reconcile_duration_seconds", "histogram", nil,
		"Duration of the reconciler's runs.",
		"`SweepDuration`"}
	defEvents = Def{"buzzgate_events_total", "counter", []string{"event"},
		"Other counts of background tasks, by their CloudWatch metric name.",
		"any other count"}
)

// Histogram buckets, in seconds: an answer takes from milliseconds (a
// refusal, a replay) to the 600 s a request may last.
var (
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	ttftBuckets     = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// A request makes at most 8 provider calls.
	depthBuckets = []float64{0, 1, 2, 3, 4, 5, 6, 7}
)

// Sink is a metrics.Recorder and metrics.Counter that keeps the gateway's
// metrics in a Prometheus registry. It is safe for concurrent use.
type Sink struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	ttft            *prometheus.HistogramVec
	providerCalls   *prometheus.CounterVec
	fallbacks       prometheus.Counter
	routeDepth      prometheus.Observer
	replays         prometheus.Counter
	idemRefusals    *prometheus.CounterVec
	storeErrors     prometheus.Counter
	cost            prometheus.Counter
	pairs           *prometheus.CounterVec
	dropped         *prometheus.CounterVec
	projectRequests *prometheus.CounterVec
	projectCost     *prometheus.CounterVec
	refusals        *prometheus.CounterVec
	secretRefresh   prometheus.Counter
	reconcileRuns   *prometheus.CounterVec
	reconcileHolds  *prometheus.CounterVec
	reconcileCost   prometheus.Counter
	reconcileTime   prometheus.Observer
	events          *prometheus.CounterVec
}

var (
	_ metrics.Recorder = (*Sink)(nil)
	_ metrics.Counter  = (*Sink)(nil)

	_ metrics.SweepRecorder = (*Sink)(nil)
)

// New returns a Sink with its own registry, holding the gateway's metrics
// and the Go runtime and process collectors.
func New() *Sink {
	s := &Sink{reg: prometheus.NewRegistry()}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.requests = s.counterVec(defRequests)
	s.duration = s.histogramVec(defDuration, durationBuckets)
	s.ttft = s.histogramVec(defTTFT, ttftBuckets)
	s.providerCalls = s.counterVec(defProviderCalls)
	s.fallbacks = s.counter(defFallbacks)
	s.routeDepth = s.histogramVec(defRouteDepth, depthBuckets).WithLabelValues()
	s.replays = s.counter(defReplays)
	s.idemRefusals = s.counterVec(defIdemRefusals)
	s.storeErrors = s.counter(defStoreErrors)
	s.cost = s.counter(defCost)
	s.pairs = s.counterVec(defPairs)
	s.dropped = s.counterVec(defDropped)
	s.projectRequests = s.counterVec(defProjectRequests)
	s.projectCost = s.counterVec(defProjectCost)
	s.refusals = s.counterVec(defRefusals)
	s.secretRefresh = s.counter(defSecretRefresh)
	s.reconcileRuns = s.counterVec(defReconcileRuns)
	s.reconcileHolds = s.counterVec(defReconcileHolds)
	s.reconcileCost = s.counter(defReconcileCost)
	s.reconcileTime = s.histogramVec(defReconcileDuration, durationBuckets).WithLabelValues()
	// Their few series exist from the start, at 0, for alerts on rates.
	for _, o := range []string{"ok", "failed"} {
		s.reconcileRuns.WithLabelValues(o)
	}
	for _, r := range []string{"settled", "written_off", "skipped"} {
		s.reconcileHolds.WithLabelValues(r)
	}
	s.events = s.counterVec(defEvents)
	return s
}

func (s *Sink) counterVec(d Def) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
	s.reg.MustRegister(v)
	return v
}

// counter registers a counter without labels.
func (s *Sink) counter(d Def) prometheus.Counter { return s.counterVec(d).WithLabelValues() }

func (s *Sink) histogramVec(d Def, buckets []float64) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: buckets}, d.Labels)
	s.reg.MustRegister(v)
	return v
}

// Registry is the sink's registry, for tests and other collectors.
func (s *Sink) Registry() *prometheus.Registry { return s.reg }

// Handler serves GET /metrics in Prometheus' text format (or what the
// scraper's Accept header asks for); any other path is 404.
func (s *Sink) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return mux
}

// Record counts one request.
func (s *Sink) Record(r metrics.Request) {
	api := label(r.ClientAPI)
	s.requests.WithLabelValues(api, statusLabel(r.Status)).Inc()
	s.duration.WithLabelValues(api).Observe(seconds(r.Latency))
	if r.Replayed {
		s.replays.Inc()
	}
	switch {
	case r.Conflict:
		s.idemRefusals.WithLabelValues("conflict").Inc()
	case r.ReplayUnavailable:
		s.idemRefusals.WithLabelValues("replay_unavailable").Inc()
	case r.InProgress:
		s.idemRefusals.WithLabelValues("in_progress").Inc()
	}
	if r.StoreError {
		s.storeErrors.Inc()
	}
	s.recordProviderErrors(r.FailedProviders, r.ConfigErrors)
	cost := r.Cost > 0 && !math.IsInf(r.Cost, 1) // NaN fails "> 0"
	if r.Provider != "" {
		provider := label(r.Provider)
		depth := max(r.RouteDepth, 0)
		s.providerCalls.WithLabelValues(provider, "answered").Inc()
		s.ttft.WithLabelValues(provider).Observe(seconds(r.TimeToFirstToken))
		s.routeDepth.Observe(float64(depth))
		if depth > 0 {
			s.fallbacks.Inc()
		}
		if r.ClientAPI != "" {
			s.pairs.WithLabelValues(api, label(r.UpstreamAPI), strconv.FormatBool(r.PassThrough)).Inc()
			for _, f := range r.Dropped {
				s.dropped.WithLabelValues(api, label(f)).Inc()
			}
		}
	}
	if cost {
		s.cost.Add(r.Cost)
	}
	if r.Project != "" {
		project := label(r.Project)
		s.projectRequests.WithLabelValues(project).Inc()
		if cost {
			s.projectCost.WithLabelValues(project).Add(r.Cost)
		}
		switch {
		case r.BudgetRefused:
			s.refusals.WithLabelValues(project, "budget").Inc()
		case r.BalanceRefused:
			s.refusals.WithLabelValues(project, "balance").Inc()
		case r.RateLimited:
			s.refusals.WithLabelValues(project, "rate_limit").Inc()
		}
	}
}

// recordProviderErrors counts the failed provider calls: those in
// configErrors (also in failed) as config_error, the rest as error. The
// lists are short (one entry per route step), so the quadratic scans are
// cheaper than a map.
func (s *Sink) recordProviderErrors(failed, configErrors []string) {
	for i, p := range failed {
		if contains(failed[:i], p) {
			continue // counted already
		}
		if n := count(failed, p) - count(configErrors, p); n > 0 {
			s.providerCalls.WithLabelValues(label(p), "error").Add(float64(n))
		}
	}
	for i, p := range configErrors {
		if !contains(configErrors[:i], p) {
			s.providerCalls.WithLabelValues(label(p), "config_error").Add(float64(count(configErrors, p)))
		}
	}
}

// RecordSweep counts one run of the reconciler.
func (s *Sink) RecordSweep(w metrics.Sweep) {
	outcome := "ok"
	if w.Failed {
		outcome = "failed"
	}
	s.reconcileRuns.WithLabelValues(outcome).Inc()
	s.reconcileTime.Observe(seconds(w.Duration))
	for _, c := range []struct {
		result string
		n      int
	}{{"settled", w.Settled}, {"written_off", w.WrittenOff}, {"skipped", w.Skipped}} {
		if c.n > 0 {
			s.reconcileHolds.WithLabelValues(c.result).Add(float64(c.n))
		}
	}
	if w.SettledCostNanos > 0 {
		s.reconcileCost.Add(float64(w.SettledCostNanos) / billing.NanosPerUSD)
	}
}

// Count adds n to the counter mirroring the CloudWatch metric named
// metric.
func (s *Sink) Count(metric string, n float64) {
	if n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return // a counter only grows
	}
	switch metric {
	case metrics.MetricSecretRefreshFailures:
		s.secretRefresh.Add(n)
	default:
		s.events.WithLabelValues(label(metric)).Add(n)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// statusLabels holds the labels of the statuses 100 to 599, so that a
// request's label costs no allocation.
var statusLabels = func() (l [500]string) {
	for i := range l {
		l[i] = strconv.Itoa(100 + i)
	}
	return l
}()

func statusLabel(status int) string {
	if status >= 100 && status < 600 {
		return statusLabels[status-100]
	}
	return "other"
}

// label returns s as a label value: "unknown" for "", invalid UTF-8 (which
// the client library refuses) made valid.
func label(s string) string {
	if s == "" {
		return "unknown"
	}
	if !utf8.ValidString(s) {
		return strings.ToValidUTF8(s, "_")
	}
	return s
}

// seconds is d in seconds; negative durations are 0.
func seconds(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return d.Seconds()
}
