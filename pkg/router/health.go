package router

import (
	"sync"
	"time"
)

// Health tracks each provider's recent record: consecutive failures take a
// provider out for a cool-down, and successes feed the latency and throughput
// estimates that the "latency" and "throughput" sorts use.
type Health struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu    sync.Mutex
	state map[string]*providerHealth
}

type providerHealth struct {
	failures  int
	downUntil time.Time
	// latency is an exponentially weighted mean of the time to first output;
	// throughput of completion bytes per second after it. Zero: unmeasured.
	latency    time.Duration
	throughput float64
}

// NewHealth returns a tracker that takes a provider out for cooldown after
// threshold consecutive failures.
func NewHealth(threshold int, cooldown time.Duration, now func() time.Time) *Health {
	if now == nil {
		now = time.Now
	}
	if threshold < 1 {
		threshold = 1
	}
	return &Health{threshold: threshold, cooldown: cooldown, now: now, state: map[string]*providerHealth{}}
}

func (h *Health) get(name string) *providerHealth {
	s := h.state[name]
	if s == nil {
		s = &providerHealth{}
		h.state[name] = s
	}
	return s
}

// Live reports whether the provider is out of its cool-down.
func (h *Health) Live(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state[name]
	return s == nil || !h.now().Before(s.downUntil)
}

// RetryIn is how long until the first of names is out of its cool-down
// (0 when one is live now).
func (h *Health) RetryIn(names ...string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	var soonest time.Duration = -1
	for _, n := range names {
		s := h.state[n]
		if s == nil || !now.Before(s.downUntil) {
			return 0
		}
		if d := s.downUntil.Sub(now); soonest < 0 || d < soonest {
			soonest = d
		}
	}
	return max(soonest, 0)
}

// Failure records a failed call. The threshold-th failure in a row starts a
// cool-down; after it the provider is live again but one more failure sends
// it straight back (half-open).
func (h *Health) Failure(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(name)
	s.failures++
	if s.failures >= h.threshold {
		s.downUntil = h.now().Add(h.cooldown)
		s.failures = h.threshold - 1
	}
}

// Timeout records a call that produced no output within the provider's
// first-token timeout d: a failure, and a latency sample of d, so that the
// latency and throughput sorts take the provider for measured and slow, not
// for unmeasured (which they try first).
func (h *Health) Timeout(name string, d time.Duration) {
	h.Failure(name)
	if d <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.get(name).sampleLatency(d)
}

// Success records a call that produced output, with its time to first output.
func (h *Health) Success(name string, firstOutput time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(name)
	s.failures = 0
	s.downUntil = time.Time{}
	s.sampleLatency(firstOutput)
}

// sampleLatency adds a time to first output to the weighted mean.
func (s *providerHealth) sampleLatency(d time.Duration) {
	if s.latency == 0 {
		s.latency = d
	} else {
		s.latency = (s.latency*4 + d) / 5
	}
}

// Throughput records the rate of an answer after its first output.
func (h *Health) Throughput(name string, bytesPerSecond float64) {
	if bytesPerSecond <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(name)
	if s.throughput == 0 {
		s.throughput = bytesPerSecond
	} else {
		s.throughput = (s.throughput*4 + bytesPerSecond) / 5
	}
}

// stats returns the provider's latency and throughput estimates.
func (h *Health) stats(name string) (time.Duration, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state[name]
	if s == nil {
		return 0, 0
	}
	return s.latency, s.throughput
}
