package router

import "github.com/buzzgate/buzzgate/pkg/llm"

// TokenCounter is a live candidate of a plan whose adapter can count tokens.
type TokenCounter struct {
	Candidate
	// Depth is the candidate's index in the plan (its route depth).
	Depth   int
	Counter llm.TokenCounter
}

// TokenCounters returns, in plan order, the plan's candidates whose provider
// is live and whose adapter can count tokens (llm.Caps.Counter), for token counting
// (POST /messages/count_tokens). Counting is not a generation: the caller
// makes its own call, which is not an attempt and changes no health.
func (r *Router) TokenCounters(plan *Plan) []TokenCounter {
	var out []TokenCounter
	for i, c := range plan.Candidates {
		if c.caps.Counter != nil && r.health.Live(c.Route.Provider) {
			out = append(out, TokenCounter{Candidate: c, Depth: i, Counter: c.caps.Counter})
		}
	}
	return out
}
