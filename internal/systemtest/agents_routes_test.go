package systemtest_test

import (
	"strings"
	"testing"
)

// TestAgentFixturesOnEveryRoute replays both agents' recorded turns, as
// they were sent (streamed, with their headers), through a route of each
// upstream API: each completes with one upstream call in that API's
// protocol, and on the agent's own protocol the upstream gets every member
// as the agent wrote it.
func TestAgentFixturesOnEveryRoute(t *testing.T) {
	fixtures := []struct{ file, native string }{
		{"claude-code-2.1.328-turn1.json", "anthropic"},
		{"claude-code-2.1.328-turn2.json", "anthropic"},
		{"codex-0.169.0-turn1.json", "openai-responses"},
		{"codex-0.169.0-turn2.json", "openai-responses"},
	}
	for _, api := range []string{"anthropic", "openai", "openai-responses"} {
		for _, fx := range fixtures {
			t.Run(api+"/"+fx.file, func(t *testing.T) {
				up := upstreamFor(t, api)
				url := oneRouteGateway(t, api, up.URL())

				f := loadFixture(t, fx.file)
				body := withTop(t, f.Body, map[string]string{"model": `"m"`})
				hdr := []string{"Authorization", "Bearer " + testKey}
				for k, v := range f.Headers {
					hdr = append(hdr, k, v)
				}
				res := callPath(t, url+"/api"+f.Path, string(body), hdr...)
				if res.status != 200 || up.Calls() != 1 {
					t.Fatalf("status %d, upstream calls %d: %.500s", res.status, up.Calls(), res.body)
				}
				got := up.Requests()[0]
				if got.JSON["model"] != "up-model" || got.JSON["stream"] != true {
					t.Errorf("upstream model %v, stream %v", got.JSON["model"], got.JSON["stream"])
				}
				if api == fx.native {
					sameMembers(t, got.Body, body, map[string]string{"model": `"up-model"`, "stream": "true"})
					if d := res.header.Get("X-Gateway-Dropped"); d != "" {
						t.Errorf("passed through, yet x-gateway-dropped = %q", d)
					}
				} else if res.header.Get("X-Gateway-Dropped") == "" {
					t.Errorf("translated without naming what was dropped (an agent's request always carries hints)")
				}
				// The answer is a stream in the agent's own protocol.
				end := map[string]string{"anthropic": "event: message_stop", "openai-responses": "event: response.completed"}[fx.native]
				if !strings.Contains(res.body, end) {
					t.Errorf("the answer does not end as a %s stream: %.300s", fx.native, res.body)
				}
			})
		}
	}
}
