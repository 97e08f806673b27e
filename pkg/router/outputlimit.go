package router

// MaxOutputTokens is the most output (of each choice) any of the plan's
// routes lets a request that sets no output limit produce: its adapter's
// own limit (llm.Caps.MaxOutputTokens), else the route's max_output_tokens. ok
// is false when a route has neither: that route's upstream allows its
// model's maximum, which is not known.
func (p *Plan) MaxOutputTokens() (most int64, ok bool) {
	for _, c := range p.Candidates {
		n := c.Route.MaxOutputTokens
		if d := c.caps.MaxOutputTokens; d > 0 {
			n = d
		}
		if n <= 0 {
			return 0, false
		}
		most = max(most, int64(n))
	}
	return most, len(p.Candidates) > 0
}
