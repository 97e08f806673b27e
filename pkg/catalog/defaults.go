package catalog

import (
	"strings"
	"time"
)

// Defaults filled in by ApplyDefaults for fields left unset (zero). They are
// exported so that other packages and docs can quote them instead of
// repeating the numbers.
const (
	// DefaultFirstTokenTimeout is a provider's first_token_timeout.
	DefaultFirstTokenTimeout = 60 * time.Second
	// DefaultDataCollection is a provider's data_collection.
	DefaultDataCollection = "allow"
	// DefaultSimulatedWords is simulated.words, the answer length.
	DefaultSimulatedWords = 12
	// MaxSimulatedWords bounds simulated.words so that a typo cannot make the
	// demo provider produce an enormous answer.
	MaxSimulatedWords = 10000

	// DefaultDataPolicy is a project's data_policy.
	DefaultDataPolicy = "none"
	// DefaultResidency is a project's residency.
	DefaultResidency = "anywhere"

	// DefaultIdempotencyWindow is idempotency.window.
	DefaultIdempotencyWindow = 24 * time.Hour
	// DefaultIdempotencyLease is idempotency.lease.
	DefaultIdempotencyLease = 30 * time.Second
	// DefaultMaxResponseBytes is idempotency.max_response_bytes (1 MiB).
	DefaultMaxResponseBytes = 1 << 20
	// DefaultIdempotencyMaxWait is idempotency.max_wait.
	DefaultIdempotencyMaxWait = 600 * time.Second
	// DefaultMemoryBytes is idempotency.memory_bytes (256 MiB).
	DefaultMemoryBytes = 256 << 20

	// DefaultMaxInFlight is server.max_in_flight.
	DefaultMaxInFlight = 512
	// DefaultMaxBodyBytes is server.max_body_bytes (4 MiB).
	DefaultMaxBodyBytes = 4 << 20
	// MaxRequestTimeout is both the default and the ceiling of
	// server.request_timeout: one request never runs longer than 600
	// seconds, whatever the config says (docs/architecture.md#routing-and-fallback).
	MaxRequestTimeout = 600 * time.Second
	// DefaultBodyTimeout is server.body_timeout.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultWriteTimeout is server.write_timeout.
	DefaultWriteTimeout = 30 * time.Second

	// DefaultFailureThreshold is health.failure_threshold.
	DefaultFailureThreshold = 5
	// DefaultCooldown is health.cooldown.
	DefaultCooldown = 30 * time.Second
)

// ApplyDefaults fills every unset (zero) field that has a default and
// normalizes values that have one spelling the rest of the gateway expects:
//
//   - providers: first_token_timeout 60s, data_collection "allow", base_url
//     without trailing slashes; for api: simulated, simulated.words 12
//   - projects: data_policy "none", residency "anywhere"
//   - idempotency: window 24h, lease 30s, max_response_bytes 1048576
//   - server: max_in_flight 512, max_body_bytes 4194304, request_timeout 600s
//   - health: failure_threshold 5, cooldown 30s
//
// Fields with no default (provider api, route model, ids, keys) are left for
// Validate to reject. Only zero values are replaced, so a negative number
// stays negative and Validate reports it instead of it being silently
// "fixed". ApplyDefaults is idempotent. Parse calls it; call it yourself
// (then Validate) for a Config built in Go.
func (c *Config) ApplyDefaults() {
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.FirstTokenTimeout == 0 {
			p.FirstTokenTimeout = Duration(DefaultFirstTokenTimeout)
		}
		if p.DataCollection == "" {
			p.DataCollection = DefaultDataCollection
		}
		// Upstream paths are appended to base_url ("/chat/completions"), so a
		// trailing slash would give "//" in the request path.
		p.BaseURL = strings.TrimRight(p.BaseURL, "/")
		// The simulated block is ignored for other APIs (see Provider), so it
		// gets no defaults there either.
		if p.API == "simulated" && p.Simulated.Words == 0 {
			p.Simulated.Words = DefaultSimulatedWords
		}
	}
	for i := range c.Projects {
		p := &c.Projects[i]
		if p.DataPolicy == "" {
			p.DataPolicy = DefaultDataPolicy
		}
		if p.Residency == "" {
			p.Residency = DefaultResidency
		}
	}

	idem := &c.Idempotency
	if idem.Window == 0 {
		idem.Window = Duration(DefaultIdempotencyWindow)
	}
	if idem.Lease == 0 {
		idem.Lease = Duration(DefaultIdempotencyLease)
	}
	if idem.MaxResponseBytes == 0 {
		idem.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if idem.MaxWait == 0 {
		idem.MaxWait = Duration(DefaultIdempotencyMaxWait)
	}
	if idem.MemoryBytes == 0 {
		idem.MemoryBytes = DefaultMemoryBytes
	}

	s := &c.Server
	if s.MaxInFlight == 0 {
		s.MaxInFlight = DefaultMaxInFlight
	}
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if s.RequestTimeout == 0 {
		s.RequestTimeout = Duration(MaxRequestTimeout)
	}
	if s.BodyTimeout == 0 {
		s.BodyTimeout = Duration(DefaultBodyTimeout)
	}
	if s.WriteTimeout == 0 {
		s.WriteTimeout = Duration(DefaultWriteTimeout)
	}

	h := &c.Health
	if h.FailureThreshold == 0 {
		h.FailureThreshold = DefaultFailureThreshold
	}
	if h.Cooldown == 0 {
		h.Cooldown = Duration(DefaultCooldown)
	}
}
