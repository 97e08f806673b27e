// Package secrets reads the gateway's secrets (the providers' keys and the
// key pepper) from one AWS Secrets Manager secret at run time, not from the
// function's environment: the values are not readable by whoever may read
// the function's configuration, and a rotated key is used without a
// deploy.
//
// The secret's SecretString is a JSON object of strings, each provider's
// key under the name its api_key_env gives ({"ALPHA_API_KEY": "sk-...",
// "KEY_PEPPER": "..."}). Open reads it once, at start-up; Get answers from
// memory and, once the value is older than the refresh interval, starts one
// read in the background. A read that fails keeps the last good value, logs
// a warning and counts SecretRefreshFailures.
//
// # Frozen environments
//
// Under Lambda the execution environment is frozen between invocations:
// a background read started near an invocation's end may be in flight
// when the process stops, and resume minutes later with its deadline long
// past, or its connection gone. That is not the secret failing: a read
// that ended later than its deadline allows (readTimeout plus
// freezeSlack) did not run the whole time, so it is not counted and the
// secret is read again at once, with a deadline of its own. Only a read
// that failed while the process ran counts as a failure.
package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buzzgate/buzzgate/pkg/metrics"
)

// DefaultRefresh is how long a value is used before it is read again.
const DefaultRefresh = 5 * time.Minute

// readTimeout bounds one read of the secret.
const readTimeout = 10 * time.Second

// freezeSlack is how much later than its deadline a failed read may end
// and still count: a running process ends a read at its deadline, give or
// take scheduling. One that ended later was frozen (or not scheduled) for
// part of it.
const freezeSlack = time.Second

// frozenReads bounds the reads in a row that a refresh makes when each was
// cut by a freeze.
const frozenReads = 3

// Reader reads the secret: *secretsmanager.Client satisfies it.
type Reader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Options configure a Source.
type Options struct {
	// Refresh is the interval between reads; 0 means DefaultRefresh.
	Refresh time.Duration
	// Log receives the failed reads (never a value).
	Log *slog.Logger
	// Metrics counts the failed reads (SecretRefreshFailures).
	Metrics metrics.Counter
	// Now is the clock of the refresh interval; nil means time.Now. A
	// read's deadline and its duration are always the real clock's.
	Now func() time.Time
	// ReadTimeout bounds one read in the background; 0 means 10 s.
	ReadTimeout time.Duration
}

// Source is the secret's values in memory. It is safe for concurrent use.
type Source struct {
	r    Reader
	id   string
	opts Options

	mu      sync.RWMutex
	values  map[string]string
	fetched time.Time
	reading atomic.Bool
	wg      sync.WaitGroup
}

// Open reads the secret id (a name or an ARN) with r. It fails when the
// read fails or the value is not a JSON object of strings: the gateway
// must not start without its keys.
func Open(ctx context.Context, r Reader, id string, opts Options) (*Source, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.Discard{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = readTimeout
	}
	s := &Source{r: r, id: id, opts: opts}
	values, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	s.values, s.fetched = values, opts.Now()
	return s, nil
}

// Get is the value named name, and whether the secret has it. When the
// values are older than the refresh interval it starts a read in the
// background (one at a time) and answers with the current ones.
func (s *Source) Get(name string) (string, bool) {
	s.mu.RLock()
	v, ok := s.values[name]
	stale := s.opts.Now().Sub(s.fetched) >= s.opts.Refresh
	s.mu.RUnlock()
	if stale && s.reading.CompareAndSwap(false, true) {
		s.wg.Add(1)
		go s.refresh()
	}
	return v, ok
}

// refresh reads the secret again; on failure it keeps the values, and
// tries again at the next Get after the refresh interval. A read cut by a
// freeze (see the package doc) is made again at once and not counted; when
// every read was, the values stay as they are and the next Get reads again.
func (s *Source) refresh() {
	defer s.wg.Done()
	defer s.reading.Store(false)
	var values map[string]string
	var err error
	frozen := false
	for range frozenReads {
		if values, frozen, err = s.readOnce(); err == nil || !frozen {
			break
		}
		s.opts.Log.Info("provider secret read cut by a freeze of the process; reading again", "secret", s.id)
	}
	if frozen {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetched = s.opts.Now()
	if err != nil {
		s.opts.Log.Warn("provider secret not refreshed; the last good value stays in use", "secret", s.id, "error", err.Error())
		s.opts.Metrics.Count(metrics.MetricSecretRefreshFailures, 1)
		return
	}
	s.values = values
}

// readOnce reads the secret under a deadline of its own; frozen reports
// that a failed read ended later than its deadline allows, so that the
// process did not run for part of it (the real clock: a freeze stops the
// process, not the clock).
func (s *Source) readOnce() (values map[string]string, frozen bool, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ReadTimeout)
	defer cancel()
	values, err = s.read(ctx)
	return values, err != nil && time.Since(start) > s.opts.ReadTimeout+freezeSlack, err
}

// read fetches and decodes the secret.
func (s *Source) read(ctx context.Context) (map[string]string, error) {
	out, err := s.r.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.id)})
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", s.id, err)
	}
	if out.SecretString == nil {
		return nil, fmt.Errorf("secret %s: no SecretString (a binary secret is not supported)", s.id)
	}
	var values map[string]string
	if err := json.Unmarshal([]byte(*out.SecretString), &values); err != nil || values == nil {
		// The error would quote the value: say only what is wrong.
		return nil, fmt.Errorf("secret %s: %w", s.id, errNotObject)
	}
	return values, nil
}

var errNotObject = errors.New(`the SecretString is not a JSON object of strings, such as {"ALPHA_API_KEY": "sk-..."}`)
