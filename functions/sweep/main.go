// Command sweep is buzzgate's billing sweep under AWS Lambda: EventBridge
// invokes it on a schedule (template.yaml, SweepFunction), and each
// invocation runs one billing.Reconciler.Reconcile with apply on the
// DynamoDB ledger: priced answers whose Bill never finished are billed, and
// holds past their deadline that never got a price are written off at zero
// cost. Reconcile is safe to run concurrently with the gateway's Bills and
// with itself, so an overlapping or repeated run counts nothing twice.
//
// Environment: BUZZGATE_TABLE (the table, default buzzgate), the AWS SDK's
// own settings (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, ...), BUZZGATE_STAGE
// (the metrics' Stage dimension) and BUZZGATE_LOG_LEVEL. It needs no config
// file, no provider key and no key pepper: Reconcile hashes no API key.
//
// It logs one JSON line per run with the counts (never a key, project or
// request id) and writes one CloudWatch Embedded Metric Format line to
// stdout: namespace Buzzgate, dimension Stage, metrics SweepSettled,
// SweepWrittenOff (Count), SweepSettledCost (None, USD) and SweepDuration
// (Milliseconds). A failed run returns its error, which Lambda counts in the
// function's Errors metric (the template's SweepErrorsAlarm).
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset) it runs once and exits,
// non-zero on failure; `admin reconcile` is the tool for a person.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Environment variables (the gateway's names, pkg/app).
const (
	envTable    = "BUZZGATE_TABLE"
	envStage    = "BUZZGATE_STAGE"
	envLogLevel = "BUZZGATE_LOG_LEVEL"

	defaultTable = "buzzgate"
	defaultStage = "default"
)

// The metrics, in the gateway's namespace with its Stage dimension
// (template.yaml's dashboard shows each).
const (
	metricNamespace        = "Buzzgate"
	metricSweepSettled     = "SweepSettled"     // Count: priced entries billed by this run
	metricSweepWrittenOff  = "SweepWrittenOff"  // Count: unpriced holds past their deadline closed at zero cost
	metricSweepSkipped     = "SweepSkipped"     // Count: holds this run could not settle (left for the next)
	metricSweepSettledCost = "SweepSettledCost" // None: USD of the settled entries
	metricSweepDuration    = "SweepDuration"    // Milliseconds: the run's Reconcile
)

func main() {
	var level slog.Level
	if v := os.Getenv(envLogLevel); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			level = slog.LevelInfo
		}
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	initCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ledger, err := newLedger(initCtx, os.Getenv)
	cancel()
	if err != nil {
		logger.Error("sweep cannot start", "error", err)
		os.Exit(1)
	}
	s := &sweeper{r: ledger, log: logger, out: os.Stdout, stage: stageOf(os.Getenv), now: time.Now}
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		lambda.Start(s.run)
		return
	}
	if _, err := s.run(context.Background()); err != nil {
		os.Exit(1)
	}
}

// newLedger builds the DynamoDB ledger the gateway uses, from the
// environment. It makes no network call (the table is the template's).
func newLedger(ctx context.Context, getenv func(string) string) (*dynamoledger.Store, error) {
	table := getenv(envTable)
	if table == "" {
		table = defaultTable
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS config: %w", err)
	}
	// The same Options as the gateway's ledger (pkg/app): Shards and
	// HoldShards must match every writer of the table.
	return dynamoledger.New(dynamodb.NewFromConfig(awsCfg), table, dynamoledger.Options{}), nil
}

func stageOf(getenv func(string) string) string {
	if s := getenv(envStage); s != "" {
		return s
	}
	return defaultStage
}

// sweeper runs one Reconcile per invocation and reports it.
type sweeper struct {
	r     billing.Reconciler
	log   *slog.Logger
	out   io.Writer // EMF lines
	stage string
	now   func() time.Time
}

// Result is the invocation's answer (what a manual `aws lambda invoke`
// shows): counts only.
type Result struct {
	Settled          int   `json:"settled"`
	WrittenOff       int   `json:"written_off"`
	Skipped          int   `json:"skipped"`
	SettledCostNanos int64 `json:"settled_cost_nanos"`
}

// run is the Lambda handler; the scheduled event's payload is not needed.
func (s *sweeper) run(ctx context.Context) (Result, error) {
	start := s.now()
	rec, err := s.r.Reconcile(ctx, start, true)
	took := s.now().Sub(start)
	res := Result{Settled: len(rec.Settled), WrittenOff: len(rec.WrittenOff), Skipped: len(rec.Skipped)}
	for _, e := range rec.Settled {
		res.SettledCostNanos += e.CostNanos
	}
	s.emit(start, res, took)
	attrs := []any{
		"settled", res.Settled, "written_off", res.WrittenOff, "skipped", res.Skipped,
		"settled_cost_usd", llm.USD(billing.NanosToUSD(res.SettledCostNanos)),
		"duration_ms", took.Milliseconds(),
	}
	if res.Skipped > 0 {
		// Which ones and why: `admin reconcile` lists them (request ids
		// and projects stay out of the function's log).
		s.log.Error("billing sweep could not settle some holds; the next run tries them again", "skipped", res.Skipped)
	}
	if err != nil {
		s.log.Error("billing sweep failed", append(attrs, "error", err)...)
		return res, err
	}
	s.log.Info("billing sweep done", attrs...)
	return res, nil
}

// emit writes the run's EMF line (one Write, so it never interleaves).
func (s *sweeper) emit(at time.Time, res Result, took time.Duration) {
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	line := map[string]any{
		"_aws": map[string]any{
			"Timestamp": at.UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  metricNamespace,
				"Dimensions": [][]string{{"Stage"}},
				"Metrics": []metric{
					{metricSweepSettled, "Count"},
					{metricSweepWrittenOff, "Count"},
					{metricSweepSkipped, "Count"},
					{metricSweepSettledCost, "None"},
					{metricSweepDuration, "Milliseconds"},
				},
			}},
		},
		"Stage":                s.stage,
		metricSweepSettled:     res.Settled,
		metricSweepWrittenOff:  res.WrittenOff,
		metricSweepSkipped:     res.Skipped,
		metricSweepSettledCost: llm.USD(billing.NanosToUSD(res.SettledCostNanos)),
		metricSweepDuration:    took.Milliseconds(),
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	_, _ = s.out.Write(append(b, '\n'))
}
