// Package app is buzzgate's composition root: it reads the environment and
// the config, builds the provider adapters, the router and the HTTP handler,
// and hands back one http.Handler. Only functions/* call it.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
	"github.com/buzzgate/buzzgate/pkg/billing/memledger"
	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/ddbtable"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/dynamostore"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/metrics"
	"github.com/buzzgate/buzzgate/pkg/metrics/prom"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
	"github.com/buzzgate/buzzgate/pkg/provider/bedrock"
	"github.com/buzzgate/buzzgate/pkg/provider/openai"
	"github.com/buzzgate/buzzgate/pkg/provider/openairesponses"
	"github.com/buzzgate/buzzgate/pkg/provider/simulated"
	"github.com/buzzgate/buzzgate/pkg/ratelimit"
	"github.com/buzzgate/buzzgate/pkg/router"
	"github.com/buzzgate/buzzgate/pkg/secrets"
	"github.com/buzzgate/buzzgate/pkg/tokenize"
)

// Environment variables (docs/configuration.md#environment-variables).
const (
	EnvConfig = "BUZZGATE_CONFIG"
	EnvAddr   = "BUZZGATE_ADDR"
	EnvStore  = "BUZZGATE_STORE"
	EnvTable  = "BUZZGATE_TABLE"
	// EnvCreateTable: "true" or "false" to create a missing DynamoDB table
	// at start-up; by default it is created except under Lambda.
	EnvCreateTable = "BUZZGATE_CREATE_TABLE"
	// EnvMetrics is emf or off; EnvStage names the metrics' Stage.
	EnvMetrics = "BUZZGATE_METRICS"
	EnvStage   = "BUZZGATE_STAGE"
	// EnvMetricsAddr, when set, is where the local server serves GET
	// /metrics in Prometheus' text format; never under Lambda.
	EnvMetricsAddr = "BUZZGATE_METRICS_ADDR"
	// EnvKeyPepper is the secret mixed into stored API key hashes.
	EnvKeyPepper = "BUZZGATE_KEY_PEPPER"
	// EnvSecretID names the Secrets Manager secret holding the providers'
	// keys and the pepper (pkg/secrets); EnvSecretRefresh is how often it
	// is read again (a Go duration, default 5m).
	EnvSecretID      = "BUZZGATE_SECRET_ID"
	EnvSecretRefresh = "BUZZGATE_SECRET_REFRESH"
	// EnvJSONKeepAlive is how long a JSON answer being produced may leave
	// its client's connection idle before whitespace keeps it busy (a Go
	// duration; 0 for never). Default: LambdaJSONKeepAlive when the
	// function streams under Lambda, else never.
	EnvJSONKeepAlive = "BUZZGATE_JSON_KEEPALIVE"
	// SecretPepperName is the pepper's name in that secret.
	SecretPepperName = "KEY_PEPPER"

	// LambdaJSONKeepAlive is under API Gateway's idle timeout of a
	// streamed response (5 minutes on a regional REST API), with a margin.
	LambdaJSONKeepAlive = 240 * time.Second

	DefaultAddr  = "127.0.0.1:8080"
	DefaultTable = "buzzgate"
)

// App is a built gateway.
type App struct {
	Config  *catalog.Config
	Router  *router.Router
	Handler http.Handler
	// Finisher retries the writes after answers; drain it at shutdown.
	Finisher *gateway.Finisher
	// Reconciler settles holds left by failed or crashed requests (nil
	// when the ledger has none).
	Reconciler billing.Reconciler
	// MetricsHandler serves GET /metrics in Prometheus' text format, on
	// a listener of its own at MetricsAddr (BUZZGATE_METRICS_ADDR); nil
	// when that is unset, and always under Lambda.
	MetricsHandler http.Handler
	MetricsAddr    string
	// Metrics is what records the requests' metrics (nil: none); the
	// local server's reconciler records its runs there too when it is a
	// metrics.SweepRecorder.
	Metrics metrics.Recorder
}

// Options are App's dependencies from outside: the environment, a logger
// and a clock, so tests can set each.
type Options struct {
	Getenv func(string) string
	Logger *slog.Logger
	Now    func() time.Time
	// HTTPClient is used by the openai and anthropic adapters; nil means their
	// default.
	HTTPClient *http.Client
	// Store is the idempotency store; nil means the one BUZZGATE_STORE
	// names (New), or a memory store (FromConfig).
	Store idempotency.Store
	// Metrics records per-request metrics; nil means the one
	// BUZZGATE_METRICS names (New), or none (FromConfig).
	Metrics metrics.Recorder
	// Stdout is where EMF metric lines go; nil means os.Stdout.
	Stdout io.Writer
	// Accounts is the ledger and the issued keys; a zero value means the
	// ones BUZZGATE_STORE names (New), or in memory (FromConfig).
	Accounts httpapi.Accounts
	// Tokens counts the tokens of an answer billed without the provider's
	// usage; nil means the vocabularies of tokenize.DefaultDir (New), or
	// of BUZZGATE_TOKENIZER_DIR (FromConfig).
	Tokens *tokenize.Counter
	// AWSCredentials sign the calls of bedrock providers; nil means the
	// AWS SDK's default chain (the environment, a profile, the function's
	// role).
	AWSCredentials aws.CredentialsProvider
	// JSONKeepAlive is how long a JSON answer being produced may leave its
	// client's connection idle before whitespace keeps it busy
	// (httpapi.Options.JSONKeepAlive); 0 means BUZZGATE_JSON_KEEPALIVE's
	// (New), or never (FromConfig); negative, never.
	JSONKeepAlive time.Duration
	// Secrets, when set, holds the providers' keys by their api_key_env
	// names, read at each call (a name it lacks is read from the
	// environment); nil means the one BUZZGATE_SECRET_ID names (New), or
	// none (FromConfig).
	Secrets *secrets.Source
}

// New builds the gateway from the environment: BUZZGATE_CONFIG names the
// config file (unset: the embedded demo config), BUZZGATE_STORE the
// idempotency store.
func New(ctx context.Context, opts Options) (*App, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var cfg *catalog.Config
	if path := getenv(EnvConfig); path != "" {
		var err error
		if cfg, err = catalog.Load(path); err != nil {
			return nil, err
		}
	} else {
		cfg = catalog.Demo()
	}
	if opts.Tokens == nil {
		opts.Tokens = tokenize.New(tokenize.DefaultDir(getenv), opts.Logger)
	}
	if opts.Metrics == nil {
		m, err := newMetrics(getenv, opts.Stdout)
		if err != nil {
			return nil, err
		}
		opts.Metrics = m
	}
	sink, metricsAddr, err := newPrometheus(getenv, opts.Logger)
	if err != nil {
		return nil, err
	}
	if sink != nil {
		// One request's metrics feed both sinks.
		opts.Metrics = metrics.Tee(opts.Metrics, sink)
	}
	if opts.Secrets == nil && getenv(EnvSecretID) != "" {
		src, err := openSecrets(ctx, getenv, opts.Logger, opts.Metrics)
		if err != nil {
			return nil, err
		}
		opts.Secrets = src
	}
	if src := opts.Secrets; src != nil {
		// The pepper is read once: keys hashed with one pepper are not
		// found with another, so it changes only with a restart.
		base := getenv
		getenv = func(k string) string {
			if k == EnvKeyPepper {
				if v, ok := src.Get(SecretPepperName); ok {
					return v
				}
			}
			return base(k)
		}
	}
	if opts.Store == nil {
		store, accounts, err := newStores(ctx, cfg, getenv, opts.Logger)
		if err != nil {
			return nil, err
		}
		opts.Store, opts.Accounts = store, accounts
	}
	if opts.JSONKeepAlive == 0 {
		d, err := jsonKeepAlive(getenv)
		if err != nil {
			return nil, err
		}
		opts.JSONKeepAlive = d
	}
	a, err := FromConfig(cfg, opts)
	if err != nil {
		return nil, err
	}
	if sink != nil {
		a.MetricsHandler, a.MetricsAddr = sink.Handler(), metricsAddr
	}
	return a, nil
}

// newPrometheus returns the Prometheus sink and its address when
// BUZZGATE_METRICS_ADDR is set, and nil when it is not or under Lambda
// (AWS_LAMBDA_RUNTIME_API set), where nothing may listen: an execution
// environment takes no connections, and CloudWatch has the metrics.
func newPrometheus(getenv func(string) string, log *slog.Logger) (*prom.Sink, string, error) {
	addr := getenv(EnvMetricsAddr)
	if addr == "" {
		return nil, "", nil
	}
	if getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		log.Info(EnvMetricsAddr + " is ignored under Lambda: metrics go to CloudWatch")
		return nil, "", nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return nil, "", fmt.Errorf("%s=%q: want host:port such as 127.0.0.1:9090", EnvMetricsAddr, addr)
	}
	return prom.New(), addr, nil
}

// openSecrets reads the secret BUZZGATE_SECRET_ID names with the AWS SDK's
// default configuration (its region and credentials).
func openSecrets(ctx context.Context, getenv func(string) string, log *slog.Logger, m metrics.Recorder) (*secrets.Source, error) {
	refresh := secrets.DefaultRefresh
	if v := getenv(EnvSecretRefresh); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive duration such as 5m", EnvSecretRefresh, v)
		}
		refresh = d
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSecretID, err)
	}
	counter, _ := m.(metrics.Counter)
	id := getenv(EnvSecretID)
	src, err := secrets.Open(ctx, secretsmanager.NewFromConfig(awsCfg), id, secrets.Options{Refresh: refresh, Log: log, Metrics: counter})
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", EnvSecretID, id, err)
	}
	return src, nil
}

// newMetrics: BUZZGATE_METRICS=emf writes CloudWatch Embedded Metric Format
// lines to stdout (the default under Lambda, where CloudWatch Logs turns
// them into metrics), off records nothing (the default elsewhere).
// BUZZGATE_STAGE is the Stage dimension.
func newMetrics(getenv func(string) string, stdout io.Writer) (metrics.Recorder, error) {
	mode := getenv(EnvMetrics)
	if mode == "" {
		mode = "off"
		if getenv("AWS_LAMBDA_RUNTIME_API") != "" {
			mode = "emf"
		}
	}
	switch mode {
	case "off":
		return metrics.Discard{}, nil
	case "emf":
		if stdout == nil {
			stdout = os.Stdout
		}
		stage := getenv(EnvStage)
		if stage == "" {
			stage = "local"
		}
		return metrics.NewEMF(stdout, stage), nil
	}
	return nil, fmt.Errorf("%s=%q: want emf or off", EnvMetrics, mode)
}

// newStores builds the idempotency store and the accounts (ledger, issued
// keys) BUZZGATE_STORE names: both in memory, or both in one DynamoDB table.
// The DynamoDB endpoint, region and credentials come from the AWS SDK's own
// settings (AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL, AWS_REGION, ...),
// so the same binary talks to DynamoDB or to a local stand-in unchanged.
// BUZZGATE_KEY_PEPPER is mixed into every stored key hash.
func newStores(ctx context.Context, cfg *catalog.Config, getenv func(string) string, log *slog.Logger) (idempotency.Store, httpapi.Accounts, error) {
	pepper := []byte(getenv(EnvKeyPepper))
	switch store := getenv(EnvStore); store {
	case "", "memory":
		ledger := memledger.New(memledger.Options{Pepper: pepper})
		return memstore.New(cfg.Idempotency.MemoryBytes), httpapi.Accounts{Ledger: ledger, Keys: ledger, Pepper: pepper, Limiter: ratelimit.NewMemory()}, nil
	case "dynamodb":
		table := getenv(EnvTable)
		if table == "" {
			table = DefaultTable
		}
		if len(pepper) == 0 {
			log.Warn(EnvKeyPepper + " is not set: issued API keys are hashed without a pepper")
		}
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, httpapi.Accounts{}, fmt.Errorf("%s=dynamodb: AWS config: %w", EnvStore, err)
		}
		client := dynamodb.NewFromConfig(awsCfg)
		// Under Lambda the SAM template creates the table, and a cold start
		// makes no network call the first request does not need; elsewhere
		// (a local server, two of them starting at once) the gateway
		// creates a missing table itself. BUZZGATE_CREATE_TABLE=true or
		// false overrides.
		create := getenv("AWS_LAMBDA_RUNTIME_API") == ""
		if v := getenv(EnvCreateTable); v != "" {
			create = v == "true"
		}
		if create {
			if err := ddbtable.EnsureTable(ctx, client, table); err != nil {
				return nil, httpapi.Accounts{}, fmt.Errorf("%s=dynamodb: table %q: %w", EnvStore, table, err)
			}
		}
		ledger := dynamoledger.New(client, table, dynamoledger.Options{Pepper: pepper})
		keys := billing.NewKeyCache(ledger, billing.KeyCacheOptions{})
		return dynamostore.New(client, table), httpapi.Accounts{Ledger: ledger, Keys: keys, Pepper: pepper, Limiter: ratelimit.NewDynamo(client, table)}, nil
	default:
		return nil, httpapi.Accounts{}, fmt.Errorf("%s=%q: want memory or dynamodb", EnvStore, store)
	}
}

// warnMissingKey says at start-up that a provider's api_key_env names a
// variable that is unset or empty (and that the provider secret, when
// there is one, does not hold): the gateway still starts, and calls the
// provider without a key, which it will likely refuse (401), until the
// variable is set or the secret gains it.
func warnMissingKey(log *slog.Logger, provider, env string, secret bool) {
	if log == nil {
		return
	}
	where := "the environment"
	if secret {
		where = "the environment or the provider secret (" + EnvSecretID + ")"
	}
	log.Warn(fmt.Sprintf("provider %q has no key: its api_key_env %s is not set in %s, so it is called without one", provider, env, where),
		"provider", provider, "api_key_env", env)
}

// FromConfig builds the gateway from a validated config.
func FromConfig(cfg *catalog.Config, opts Options) (*App, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	providers := make(map[string]llm.Provider, len(cfg.Providers))
	var awsCfg *aws.Config // loaded at the first bedrock provider
	for _, p := range cfg.Providers {
		// The key: from the environment once, or, with a secret, read at
		// each call (a rotation needs no restart).
		key, keyFn := "", func() string { return "" }
		if p.APIKeyEnv != "" {
			key = getenv(p.APIKeyEnv)
			name := p.APIKeyEnv
			keyFn = func() string {
				if v, ok := opts.Secrets.Get(name); ok {
					return v
				}
				return key
			}
		}
		rotating := opts.Secrets != nil && p.APIKeyEnv != ""
		if p.APIKeyEnv != "" && key == "" && (!rotating || keyFn() == "") {
			warnMissingKey(opts.Logger, p.Name, p.APIKeyEnv, rotating)
		}
		switch p.API {
		case "openai":
			var o []openai.Option
			if rotating {
				o = append(o, openai.WithKey(keyFn))
			}
			c := openai.New(p.Name, p.BaseURL, key, opts.HTTPClient, o...)
			c.SetMaxTokensField(p.MaxTokensField)
			providers[p.Name] = c
		case "openai-responses":
			var o []openairesponses.Option
			if rotating {
				o = append(o, openairesponses.WithKey(keyFn))
			}
			providers[p.Name] = openairesponses.New(p.Name, p.BaseURL, key, opts.HTTPClient, o...)
		case "anthropic":
			var o []anthropic.Option
			if rotating {
				o = append(o, anthropic.WithKey(keyFn))
			}
			providers[p.Name] = anthropic.New(p.Name, p.BaseURL, key, opts.HTTPClient, o...)
		case "bedrock":
			if awsCfg == nil {
				// One configuration (and credential cache) for every
				// bedrock provider; each sets its own region.
				var o []func(*awsconfig.LoadOptions) error
				if opts.AWSCredentials != nil {
					o = append(o, awsconfig.WithCredentialsProvider(opts.AWSCredentials))
				}
				c, err := awsconfig.LoadDefaultConfig(context.Background(), o...)
				if err != nil {
					return nil, fmt.Errorf("provider %q: %w", p.Name, err)
				}
				awsCfg = &c
			}
			rt := bedrock.NewRuntime(*awsCfg, p.AWSRegion, p.BaseURL, opts.HTTPClient)
			claude := anthropic.NewOver(p.Name, bedrock.ClaudeTransport{Runtime: rt})
			providers[p.Name] = bedrock.New(p.Name, rt, claude)
		case "simulated":
			providers[p.Name] = simulated.New(p.Name, p.Simulated)
		default:
			return nil, fmt.Errorf("provider %q: unsupported api %q", p.Name, p.API)
		}
	}
	rt, err := router.New(cfg, providers, nil, opts.Now)
	if err != nil {
		return nil, err
	}
	if opts.Tokens == nil {
		opts.Tokens = tokenize.New(getenv(tokenize.DirEnv), opts.Logger)
	}
	rt.CountWith(opts.Tokens)
	store := opts.Store
	if store == nil {
		store = memstore.New(cfg.Idempotency.MemoryBytes)
	}
	accounts := opts.Accounts
	if accounts.Ledger == nil {
		ledger := memledger.New(memledger.Options{Pepper: accounts.Pepper})
		accounts.Ledger, accounts.Keys = ledger, ledger
	}
	if accounts.Limiter == nil {
		accounts.Limiter = ratelimit.NewMemory()
	}
	idem := idempotency.New(store, idempotency.Config{
		Window:           cfg.Idempotency.Window.D(),
		Lease:            cfg.Idempotency.Lease.D(),
		MaxResponseBytes: cfg.Idempotency.MaxResponseBytes,
		MaxWait:          min(cfg.Idempotency.MaxWait.D(), cfg.Server.RequestTimeout.D()),
	}, opts.Now, opts.Logger)
	fin := gateway.NewFinisher(gateway.FinisherOptions{Log: opts.Logger})
	h := httpapi.New(cfg, rt, httpapi.Options{Logger: opts.Logger, Now: opts.Now, Idempotency: idem, Metrics: opts.Metrics, Accounts: accounts, Finisher: fin,
		JSONKeepAlive: max(opts.JSONKeepAlive, 0)})
	a := &App{Config: cfg, Router: rt, Handler: h, Finisher: fin, Metrics: opts.Metrics}
	if r, ok := accounts.Ledger.(billing.Reconciler); ok {
		a.Reconciler = r
	}
	return a, nil
}

// jsonKeepAlive is BUZZGATE_JSON_KEEPALIVE, by default LambdaJSONKeepAlive
// where the function streams under Lambda (AWS_LAMBDA_RUNTIME_API set, not
// under SAM CLI, which buffers): there API Gateway cuts a response that
// sends nothing for 5 minutes, and a JSON answer sends nothing until it is
// whole. Elsewhere there is no such proxy by default, and a keep-alive
// would fix the status early for nothing.
func jsonKeepAlive(getenv func(string) string) (time.Duration, error) {
	v := getenv(EnvJSONKeepAlive)
	if v == "" {
		if getenv("AWS_LAMBDA_RUNTIME_API") != "" && getenv("AWS_SAM_LOCAL") != "true" {
			return LambdaJSONKeepAlive, nil
		}
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 240s, or 0 for none", EnvJSONKeepAlive, v)
	}
	return d, nil
}
