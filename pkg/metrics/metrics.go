// Package metrics publishes the gateway's per-request CloudWatch metrics
// through the Embedded Metric Format (EMF): each request is written as one
// JSON object on one line to an io.Writer (stdout under Lambda), and
// CloudWatch Logs extracts the metrics from it. No API call is made and
// nothing is buffered across requests.
//
// A line is, following the EMF specification:
//
//	{"_aws":{"Timestamp":<unix ms>,"CloudWatchMetrics":[{"Namespace":"Buzzgate",
//	  "Dimensions":[["Stage"]],"Metrics":[{"Name":"Requests","Unit":"Count"},...]}]},
//	 "Stage":"prod","Requests":1,...}
//
// The metric values and the dimension values are top-level members of the
// same object, and every metric named in "Metrics" has a value on that line
// (the list is built per line, so metrics that do not apply to a request are
// left out of both). Only numbers and the stage and provider names are
// written: never prompts, answers or keys.
//
// Counts are written as 0 or 1 (or the count) on every request, so that Sum
// and Average (a rate) are both right in CloudWatch. ProviderErrors is
// published with two dimension sets: ["Stage"] on the request's line (the
// total, for alarms) and ["Stage","Provider"] on one extra line per distinct
// failed provider, since an EMF object holds one value per dimension.
package metrics

import (
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/internal/jsonstr"
)

// The names the SAM template and the dashboard refer to.
const (
	Namespace = "Buzzgate"

	// Dimensions.
	DimStage       = "Stage"
	DimProvider    = "Provider"
	DimClientAPI   = "ClientAPI"
	DimUpstreamAPI = "UpstreamAPI"
	DimField       = "Field"
	DimProject     = "Project"

	// Metrics, all with the dimension set ["Stage"]; ProviderErrors also with
	// ["Stage","Provider"].
	MetricRequests               = "Requests"               // Count, always 1
	MetricReplays                = "Replays"                // Count
	MetricIdempotencyConflicts   = "IdempotencyConflicts"   // Count
	MetricReplayUnavailable      = "ReplayUnavailable"      // Count
	MetricIdempotencyInProgress  = "IdempotencyInProgress"  // Count
	MetricIdempotencyStoreErrors = "IdempotencyStoreErrors" // Count
	MetricFallbacks              = "Fallbacks"              // Count: answered at depth > 0
	MetricRouteDepth             = "RouteDepth"             // None; only when a provider answered
	MetricProviderErrors         = "ProviderErrors"         // Count: failed provider calls
	MetricProviderConfigErrors   = "ProviderConfigErrors"   // Count: provider calls failed for the provider's configuration
	MetricSecretRefreshFailures  = "SecretRefreshFailures"  // Count: failed reads of the provider secret (the last good value kept)
	MetricLatency                = "Latency"                // Milliseconds, always
	MetricTimeToFirstToken       = "TimeToFirstToken"       // Milliseconds; only when a provider answered
	MetricCost                   = "Cost"                   // None (USD); only when > 0
	MetricErrors5xx              = "Errors5xx"              // Count: status >= 500

	// With the dimension set ["Stage","ClientAPI","UpstreamAPI"], on one
	// extra line per request a provider answered: which protocol pairs
	// run, and how many of them passed through untranslated.
	MetricPairRequests = "PairRequests" // Count, always 1
	MetricPassThrough  = "PassThrough"  // Count: the request passed through
	// With ["Stage","ClientAPI","Field"], one line per field a translation
	// left out (named in x-gateway-dropped).
	MetricDroppedFields = "DroppedFields" // Count
	// With ["Stage","Project"], one line per request of an authenticated
	// project: its requests, its spend, and the new requests refused for
	// its money (a spent budget; a spent balance or key limit) or its
	// rate limits.
	MetricProjectRequests = "ProjectRequests" // Count, always 1
	MetricProjectCost     = "ProjectCost"     // None (USD); only when > 0
	MetricBudgetRefusals  = "BudgetRefusals"  // Count: 402 budget_exceeded
	MetricBalanceRefusals = "BalanceRefusals" // Count: 402 insufficient_balance or key_limit_reached
	MetricRateLimited     = "RateLimited"     // Count: 429 rate_limited (the project's or a key's rpm or tpm)
)

// CloudWatch units used here (MetricDatum's StandardUnit values).
const (
	unitCount        = "Count"
	unitNone         = "None"
	unitMilliseconds = "Milliseconds"
)

// Request is what one request reports, once, when its answer is finished.
type Request struct {
	// Status is the HTTP status of the answer.
	Status int
	// Replayed: answered from the idempotency record (a replay, a waiter
	// or a stream joiner) rather than by a provider call of its own.
	Replayed bool
	// Conflict, ReplayUnavailable, InProgress, StoreError: the request was
	// refused by the idempotency layer for that reason.
	Conflict, ReplayUnavailable, InProgress, StoreError bool
	// Provider is the provider that answered, "" if none did (an error, or
	// an answer from the idempotency record).
	Provider string
	// RouteDepth is the answering provider's depth in the route (0 for the
	// first choice). Fallbacks counts requests answered at depth > 0.
	RouteDepth int
	// FailedProviders has one entry per failed provider call, in order; a
	// provider may appear more than once.
	FailedProviders []string
	// ConfigErrors has one entry per provider call that failed for the
	// provider's configuration (llm.FailConfig), also in FailedProviders.
	ConfigErrors []string
	// Latency is the whole request's duration.
	Latency time.Duration
	// TimeToFirstToken is the time to the answering provider's first token;
	// it is published only when Provider is set.
	TimeToFirstToken time.Duration
	// Cost is the request's cost in USD; published only when > 0.
	Cost float64
	// ClientAPI is the client's protocol (chat, messages, responses);
	// UpstreamAPI the answering provider's api (openai, anthropic, ...),
	// set with Provider; PassThrough: the request went upstream in the
	// client's own protocol.
	ClientAPI, UpstreamAPI string
	PassThrough            bool
	// Dropped are the fields named in the answer's x-gateway-dropped.
	Dropped []string
	// Project is the authenticated caller's project ("" before or
	// without authentication); BudgetRefused and BalanceRefused: the
	// request was refused with 402 for a spent budget, or a spent balance
	// or key limit.
	Project                                    string
	BudgetRefused, BalanceRefused, RateLimited bool
}

// Recorder records requests' metrics. Implementations are safe for
// concurrent use.
type Recorder interface {
	Record(Request)
}

// Discard is a Recorder that records nothing.
type Discard struct{}

// Record does nothing.
func (Discard) Record(Request) {}

var (
	_ Recorder = Discard{}
	_ Recorder = (*EMF)(nil)
)

// EMF is a Recorder that writes EMF lines to an io.Writer. It is safe for
// concurrent use: each line is written with one Write call, and the lines of
// one request are written together under a lock, so lines never interleave.
// Write errors are ignored (metrics never fail a request).
type EMF struct {
	stage string // already a valid dimension value
	now   func() time.Time

	mu sync.Mutex
	w  io.Writer
}

// NewEMF returns an EMF writing to w, with stage as the Stage dimension.
// A stage that is not a valid CloudWatch dimension value is made into one
// (see the Stage dimension's rules in dimensionValue).
func NewEMF(w io.Writer, stage string) *EMF {
	return &EMF{w: w, stage: dimensionValue(stage), now: time.Now}
}

// maxPooledBuffer bounds the buffers kept for reuse, so that one request with
// an unusually long list of failed providers does not pin a large buffer.
const maxPooledBuffer = 16 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// Record writes r's metrics: the request's line, then one line per distinct
// failed provider.
func (e *EMF) Record(r Request) {
	bp := bufPool.Get().(*[]byte)
	ts := e.now().UnixMilli()
	b := e.appendRequest((*bp)[:0], ts, &r)
	b = e.appendProviderErrors(b, ts, MetricProviderErrors, r.FailedProviders)
	b = e.appendProviderErrors(b, ts, MetricProviderConfigErrors, r.ConfigErrors)
	b = e.appendPair(b, ts, &r)
	b = e.appendProject(b, ts, &r)
	e.write(b)
	if cap(b) <= maxPooledBuffer {
		*bp = b
		bufPool.Put(bp)
	}
}

// Counter records a count that is not a request's: a background task's
// outcome. EMF implements it; Discard too.
type Counter interface {
	Count(metric string, n float64)
}

// Count writes one line with metric = n (unit Count) on the Stage
// dimension.
func (e *EMF) Count(name string, n float64) {
	ms := [1]metric{{name, unitCount, n}}
	e.write(e.appendLine(nil, e.now().UnixMilli(), `[["`+DimStage+`"]]`, ms[:]))
}

// Count does nothing.
func (Discard) Count(string, float64) {}

// write writes b, a run of newline-terminated lines, one Write per line.
func (e *EMF) write(b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(b) > 0 {
		n := 0
		for b[n] != '\n' { // every line ends in '\n'; strings never hold a raw one
			n++
		}
		_, _ = e.w.Write(b[:n+1])
		b = b[n+1:]
	}
}

// metric is one metric of a line: its definition and its value.
type metric struct {
	name, unit string
	v          float64
}

// maxMetrics is the most metrics one line has (the EMF limit is 100 per
// directive).
const maxMetrics = 13

func (e *EMF) appendRequest(b []byte, ts int64, r *Request) []byte {
	var buf [maxMetrics]metric
	ms := buf[:0]
	add := func(name, unit string, v float64) { ms = append(ms, metric{name, unit, v}) }
	answered := r.Provider != ""
	depth := max(r.RouteDepth, 0)

	add(MetricRequests, unitCount, 1)
	add(MetricReplays, unitCount, b2f(r.Replayed))
	add(MetricIdempotencyConflicts, unitCount, b2f(r.Conflict))
	add(MetricReplayUnavailable, unitCount, b2f(r.ReplayUnavailable))
	add(MetricIdempotencyInProgress, unitCount, b2f(r.InProgress))
	add(MetricIdempotencyStoreErrors, unitCount, b2f(r.StoreError))
	add(MetricFallbacks, unitCount, b2f(answered && depth > 0))
	add(MetricProviderErrors, unitCount, float64(len(r.FailedProviders)))
	add(MetricErrors5xx, unitCount, b2f(r.Status >= 500))
	add(MetricLatency, unitMilliseconds, millis(r.Latency))
	if answered {
		add(MetricRouteDepth, unitNone, float64(depth))
		add(MetricTimeToFirstToken, unitMilliseconds, millis(r.TimeToFirstToken))
	}
	if r.Cost > 0 && !math.IsInf(r.Cost, 1) { // NaN fails "> 0"
		add(MetricCost, unitNone, r.Cost)
	}

	b = appendHead(b, ts, `[["`+DimStage+`"]]`)
	b = appendDefinitions(b, ms)
	b = append(b, `]}]},"`+DimStage+`":`...)
	b = appendString(b, e.stage)
	b = appendValues(b, ms)
	return append(b, "}\n"...)
}

// appendProviderErrors appends one line per distinct provider in failed,
// with the dimensions Stage and Provider and metricName (ProviderErrors,
// ProviderConfigErrors) = that provider's number of calls in failed. Providers are counted by their dimension value,
// in order of first failure. The list is short (one entry per route step),
// so the quadratic scan is cheaper than a map.
func (e *EMF) appendProviderErrors(b []byte, ts int64, metricName string, failed []string) []byte {
next:
	for i, p := range failed {
		name := dimensionValue(p)
		for _, q := range failed[:i] {
			if dimensionValue(q) == name {
				continue next // counted already
			}
		}
		n := 1
		for _, q := range failed[i+1:] {
			if dimensionValue(q) == name {
				n++
			}
		}
		ms := [1]metric{{metricName, unitCount, float64(n)}}
		b = e.appendLine(b, ts, `[["`+DimStage+`","`+DimProvider+`"]]`, ms[:], DimProvider, name)
	}
	return b
}

// appendPair appends, for a request a provider answered, the line of its
// protocol pair, and one line per dropped field.
func (e *EMF) appendPair(b []byte, ts int64, r *Request) []byte {
	if r.Provider == "" || r.ClientAPI == "" {
		return b
	}
	client := dimensionValue(r.ClientAPI)
	ms := [2]metric{{MetricPairRequests, unitCount, 1}, {MetricPassThrough, unitCount, b2f(r.PassThrough)}}
	b = e.appendLine(b, ts, `[["`+DimStage+`","`+DimClientAPI+`","`+DimUpstreamAPI+`"]]`, ms[:],
		DimClientAPI, client, DimUpstreamAPI, dimensionValue(r.UpstreamAPI))
	for _, f := range r.Dropped {
		d := [1]metric{{MetricDroppedFields, unitCount, 1}}
		b = e.appendLine(b, ts, `[["`+DimStage+`","`+DimClientAPI+`","`+DimField+`"]]`, d[:],
			DimClientAPI, client, DimField, dimensionValue(f))
	}
	return b
}

// appendProject appends the line of the request's project, if it has one.
func (e *EMF) appendProject(b []byte, ts int64, r *Request) []byte {
	if r.Project == "" {
		return b
	}
	var buf [5]metric
	ms := append(buf[:0], metric{MetricProjectRequests, unitCount, 1},
		metric{MetricBudgetRefusals, unitCount, b2f(r.BudgetRefused)}, metric{MetricBalanceRefusals, unitCount, b2f(r.BalanceRefused)},
		metric{MetricRateLimited, unitCount, b2f(r.RateLimited)})
	if r.Cost > 0 && !math.IsInf(r.Cost, 1) {
		ms = append(ms, metric{MetricProjectCost, unitNone, r.Cost})
	}
	return e.appendLine(b, ts, `[["`+DimStage+`","`+DimProject+`"]]`, ms, DimProject, dimensionValue(r.Project))
}

// appendLine appends one line of metrics ms under the dimension set
// dimensions (JSON), Stage and then the dimensions named in dims, each
// followed by its value (already valid dimension values).
func (e *EMF) appendLine(b []byte, ts int64, dimensions string, ms []metric, dims ...string) []byte {
	b = appendHead(b, ts, dimensions)
	b = appendDefinitions(b, ms)
	b = append(b, `]}]},"`+DimStage+`":`...)
	b = appendString(b, e.stage)
	for i := 0; i+1 < len(dims); i += 2 {
		b = append(b, ',', '"')
		b = append(b, dims[i]...)
		b = append(b, '"', ':')
		b = appendString(b, dims[i+1])
	}
	b = appendValues(b, ms)
	return append(b, "}\n"...)
}

// appendHead appends a line's start, up to the opening of the directive's
// Metrics array.
func appendHead(b []byte, ts int64, dimensions string) []byte {
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":"`+Namespace+`","Dimensions":`...)
	b = append(b, dimensions...)
	return append(b, `,"Metrics":[`...)
}

// appendDefinitions appends the MetricDefinition objects. Names and units
// are constants of this package that need no escaping.
func appendDefinitions(b []byte, ms []metric) []byte {
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Name":"`...)
		b = append(b, m.name...)
		b = append(b, `","Unit":"`...)
		b = append(b, m.unit...)
		b = append(b, `"}`...)
	}
	return b
}

// appendValues appends ,"Name":value for each metric.
func appendValues(b []byte, ms []metric) []byte {
	for _, m := range ms {
		b = append(b, `,"`...)
		b = append(b, m.name...)
		b = append(b, `":`...)
		b = appendNumber(b, m.v)
	}
	return b
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// millis is d in milliseconds, fractions kept; negative durations are 0.
func millis(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(d) / float64(time.Millisecond)
}

// appendNumber appends a finite float as a JSON number: integers without a
// fraction, others in the shortest form that reads back exactly, as a plain
// decimal (a cost of 0.0000005 USD as an answer's usage.cost writes it),
// with an exponent only for magnitudes of 1e21 and more.
func appendNumber(b []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendInt(b, int64(f), 10)
	}
	if math.Abs(f) >= 1e21 {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// appendString appends s as a JSON string (internal/jsonstr, without the
// HTML escapes): valid JSON for any s, never a raw newline.
func appendString(b []byte, s string) []byte { return jsonstr.Append(b, s, false) }

// Dimension value rules (CloudWatch's Dimension type, which EMF dimensions
// become): ASCII only, no control characters, at least one non-whitespace
// character, at most 1024 characters. A document with an invalid dimension
// value fails EMF validation and its metrics are lost, so values are made
// valid instead.
const (
	maxDimensionValue = 1024
	// unknownDimension stands for a value with nothing valid in it (empty,
	// or only spaces).
	unknownDimension = "unknown"
)

// dimensionValue returns s as a valid dimension value: each character that
// is not printable ASCII (each byte, for invalid UTF-8) becomes '_', the
// result is cut to 1024 characters, and a value that is empty or only
// spaces becomes "unknown". A valid s is returned as is, without allocating.
func dimensionValue(s string) string {
	blank := true
	clean := len(s) <= maxDimensionValue
	for i := 0; i < len(s) && clean; i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e:
			clean = false
		case c != ' ':
			blank = false
		}
	}
	if clean {
		if blank {
			return unknownDimension
		}
		return s
	}
	out := make([]byte, 0, min(len(s), maxDimensionValue))
	blank = true
	for _, r := range s { // invalid UTF-8: one RuneError per byte
		if len(out) == maxDimensionValue {
			break
		}
		if r < 0x20 || r > 0x7e {
			r = '_'
		}
		if r != ' ' {
			blank = false
		}
		out = append(out, byte(r))
	}
	if blank {
		return unknownDimension
	}
	return string(out)
}
