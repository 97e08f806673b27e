// Package catalog is buzzgate's configuration: providers, models and their
// routes with prices, projects with their keys, and the gateway's own
// settings. It loads the YAML config file (docs/configuration.md), applies
// defaults and validates it, naming the bad field in its one error.
package catalog

import "time"

// Config is the whole configuration after defaults and validation.
type Config struct {
	Providers   []Provider  `yaml:"providers"`
	Models      []Model     `yaml:"models"`
	Projects    []Project   `yaml:"projects"`
	Idempotency Idempotency `yaml:"idempotency"`
	Server      Server      `yaml:"server"`
	Health      Health      `yaml:"health"`

	// idx is the lookup index Validate builds for Model, Provider, Project
	// and KeyOwner; nil until the Config has been validated.
	idx *index
}

// Provider is one upstream endpoint.
type Provider struct {
	Name string `yaml:"name"`
	// API is "openai" (Chat Completions over HTTP), "openai-responses"
	// (the Responses API over HTTP), "anthropic" (the Messages API over
	// HTTP), "bedrock" (AWS Bedrock Runtime, signed with the AWS SDK's
	// credentials) or "simulated" (in-process).
	API string `yaml:"api"`
	// BaseURL: for openai the URL that /chat/completions is appended to,
	// for openai-responses the one /responses is (both usually ending in
	// /v1); for anthropic the API root that /v1/messages is appended to
	// (https://api.anthropic.com); for bedrock an optional endpoint
	// override (the default is the region's Bedrock Runtime endpoint).
	BaseURL string `yaml:"base_url"`
	// AWSRegion is a bedrock provider's region (required for bedrock).
	AWSRegion string `yaml:"aws_region"`
	// APIKeyEnv names the environment variable holding the upstream key,
	// sent as a Bearer token (openai, openai-responses) or as x-api-key
	// (anthropic).
	APIKeyEnv string `yaml:"api_key_env"`
	// FirstTokenTimeout: no output by then and the provider has failed.
	// Default 60s.
	FirstTokenTimeout Duration `yaml:"first_token_timeout"`
	Region            string   `yaml:"region"`
	ZDR               bool     `yaml:"zdr"`
	// DataCollection is "allow" (default) or "deny".
	DataCollection string `yaml:"data_collection"`
	// MaxTokensField is the field an api: openai provider is sent the
	// answer's token limit in when a request of another client API is
	// translated for it: "max_completion_tokens" (default, OpenAI's), or
	// "max_tokens" for a compatible server that knows only the older name.
	MaxTokensField string `yaml:"max_tokens_field"`
	// ProviderObjects is "refuse" (the default, also when empty) or
	// "allow": whether requests routed to this provider may refer to
	// objects stored in its upstream account (files, containers, vector
	// stores, stored conversations and items). The account is the
	// operator's, shared by every project, so "allow" lets any project's
	// key reach any object of that account.
	ProviderObjects string `yaml:"provider_objects"`
	// Simulated configures an api: simulated provider; ignored otherwise.
	Simulated Simulated `yaml:"simulated"`
}

// AllowsProviderObjects reports whether requests that refer to objects
// stored in the provider's upstream account may be routed to it
// (provider_objects: allow).
func (p *Provider) AllowsProviderObjects() bool { return p.ProviderObjects == "allow" }

// Simulated is the behaviour of an in-process demo provider. Its answers are
// deterministic: the same request gets the same text.
type Simulated struct {
	// FirstTokenLatency is the wait before the first chunk.
	FirstTokenLatency Duration `yaml:"first_token_latency"`
	// ChunkLatency is the wait between chunks.
	ChunkLatency Duration `yaml:"chunk_latency"`
	// Fail makes every call fail before any output: "" (never), "error"
	// (as a 500 would), "throttle" (as a 429 would), "reject" (as a 400
	// would), "hang" (no output until the call is cancelled).
	Fail string `yaml:"fail"`
	// Words is the length of the answer in words. Default 12.
	Words int `yaml:"words"`
	// Protocol is the wire protocol the simulated upstream speaks: "openai"
	// (default: Chat Completions chunks) or "anthropic" (a Messages event
	// stream, read through the anthropic adapter as a real Anthropic
	// upstream would be).
	Protocol string `yaml:"protocol"`
}

// Model is what clients name in "model".
type Model struct {
	ID string `yaml:"id"`
	// Fallbacks are the ids of other models whose routes are tried, in
	// order, when every route of this one failed before output. Only a
	// model's own fallbacks are used: a fallback's fallbacks are not
	// followed, so two models may name each other.
	Fallbacks []string `yaml:"fallbacks"`
	Routes    []Route  `yaml:"routes"`
}

// Route is one provider of a model, in the routing preset's order.
type Route struct {
	Provider string `yaml:"provider"`
	// Model is the name sent upstream.
	Model string `yaml:"model"`
	// Prices in USD per million tokens. OutputPrice covers reasoning
	// tokens too (they are output tokens). CacheReadPrice is the price of
	// a prompt token read from the provider's prompt cache, CacheWritePrice
	// of one written to it; nil means InputPrice. CacheWrite1hPrice is the
	// price of a prompt token written to a one-hour cache (Anthropic's
	// cache_control ttl "1h"); nil means the CacheWrite price.
	InputPrice        float64  `yaml:"input_price"`
	OutputPrice       float64  `yaml:"output_price"`
	CacheReadPrice    *float64 `yaml:"cache_read_price"`
	CacheWritePrice   *float64 `yaml:"cache_write_price"`
	CacheWrite1hPrice *float64 `yaml:"cache_write_1h_price"`
	// ToolPrices are USD per call of a provider-side (server) tool, by the
	// tool's type less its version date (web_search, web_search_preview,
	// file_search, code_interpreter, image_generation, ...). A request that
	// declares a billable server tool is not sent on a route that would
	// carry the tool and has no price for it.
	ToolPrices map[string]float64 `yaml:"tool_prices"`
	// MaxOutputTokens is the most output the upstream model produces for
	// a request that sets no limit (its maximum output); 0: not known.
	// A tpm reserves it for such a request.
	MaxOutputTokens int `yaml:"max_output_tokens"`
}

// CacheRead is the route's price of a cached prompt token read, in USD per
// million tokens.
func (r Route) CacheRead() float64 {
	if r.CacheReadPrice != nil {
		return *r.CacheReadPrice
	}
	return r.InputPrice
}

// CacheWrite is the route's price of a prompt token written to the cache,
// in USD per million tokens.
func (r Route) CacheWrite() float64 {
	if r.CacheWritePrice != nil {
		return *r.CacheWritePrice
	}
	return r.InputPrice
}

// CacheWrite1h is the route's price of a prompt token written to a
// one-hour cache, in USD per million tokens.
func (r Route) CacheWrite1h() float64 {
	if r.CacheWrite1hPrice != nil {
		return *r.CacheWrite1hPrice
	}
	return r.CacheWrite()
}

// ToolPrice is the route's price of one call of the server tool named
// tool, in USD; ok is false when the route has none.
func (r Route) ToolPrice(tool string) (price float64, ok bool) {
	price, ok = r.ToolPrices[tool]
	return price, ok
}

// Project is a customer account with its API keys.
type Project struct {
	ID string `yaml:"id"`
	// Balance in USD; nil means unlimited.
	Balance *float64 `yaml:"balance"`
	// DataPolicy is "none" (default), "zdr" or "deny".
	DataPolicy string `yaml:"data_policy"`
	// Residency is "anywhere" (default) or "eu".
	Residency string `yaml:"residency"`
	// MaxInFlight bounds the project's requests running at once on one
	// instance (its share of server.max_in_flight); 0 means no bound but
	// the server's.
	MaxInFlight int `yaml:"max_in_flight"`
	// RPM and TPM bound the project's requests and tokens (prompt and
	// completion) per minute, on every instance together; 0 means none.
	RPM int64 `yaml:"rpm"`
	TPM int64 `yaml:"tpm"`
	// Budget bounds the project's spend per UTC calendar period; nil
	// means none.
	Budget *Budget `yaml:"budget"`
	Keys   []Key   `yaml:"keys"`
}

// Budget is a spend bound per UTC calendar period: a new request once the
// current period's spend reached Amount is refused (402 budget_exceeded).
type Budget struct {
	// Amount in USD.
	Amount float64 `yaml:"amount"`
	// Period is "day", "week" (ISO, from Monday) or "month".
	Period string `yaml:"period"`
}

// Key is one bearer token of a project.
type Key struct {
	Key string `yaml:"key"`
	// Limit is the key's spend limit in USD; nil means none.
	Limit *float64 `yaml:"limit"`
	// Budget bounds the key's spend per UTC calendar period; nil means
	// none.
	Budget *Budget `yaml:"budget"`
	// RPM and TPM bound the key's requests and tokens per minute; 0 means
	// none.
	RPM int64 `yaml:"rpm"`
	TPM int64 `yaml:"tpm"`
}

// Idempotency configures the Idempotency-Key records.
type Idempotency struct {
	// Window is how long a key is remembered. Default 24h.
	Window Duration `yaml:"window"`
	// Lease is how long a reservation lives without a heartbeat. Default 30s.
	Lease Duration `yaml:"lease"`
	// MaxResponseBytes: larger answers are not stored. Default 1 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// MaxWait is how long a retry waits for the first call of its key
	// before it answers 409 idempotency_in_progress. Default 600s.
	MaxWait Duration `yaml:"max_wait"`
	// MemoryBytes bounds everything the memory store holds (records,
	// tombstones, running streams' events and stored answers). Default 256 MiB.
	MemoryBytes int64 `yaml:"memory_bytes"`
}

// Server configures the HTTP front.
type Server struct {
	// MaxInFlight caps the requests one process serves at once; more are
	// refused with 429 capacity. Default 512.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxBodyBytes caps a request body; more is 413. Default 4 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// RequestTimeout is the ceiling of one request. Default and maximum 600s.
	RequestTimeout Duration `yaml:"request_timeout"`
	// BodyTimeout: the whole request body must arrive within it, or the
	// request is answered 408 body_timeout; a request is admitted only once
	// its body is read. Default 30s.
	BodyTimeout Duration `yaml:"body_timeout"`
	// WriteTimeout: a write to the client that makes no progress for this
	// long drops the client (a keyed request still finishes and records its
	// answer). Default 30s.
	WriteTimeout Duration `yaml:"write_timeout"`
}

// Health configures the provider cool-down.
type Health struct {
	// FailureThreshold consecutive failures take a provider out. Default 5.
	FailureThreshold int `yaml:"failure_threshold"`
	// Cooldown is how long it stays out. Default 30s.
	Cooldown Duration `yaml:"cooldown"`
}

// Duration is a time.Duration written in YAML as a Go duration string ("30s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
