package app

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestJSONKeepAlive: a JSON answer's keep-alive is on by default only where
// the function streams under Lambda (behind API Gateway's idle timeout),
// not under SAM CLI (buffered) nor in the local server; the variable sets
// it anywhere, 0 turns it off, and a bad value stops the start.
func TestJSONKeepAlive(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want time.Duration
	}{
		{"local server", nil, 0},
		{"lambda", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, 240 * time.Second},
		{"sam local", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "AWS_SAM_LOCAL": "true"}, 0},
		{"lambda, set", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", EnvJSONKeepAlive: "20s"}, 20 * time.Second},
		{"lambda, off", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", EnvJSONKeepAlive: "0"}, 0},
		{"local server, set", map[string]string{EnvJSONKeepAlive: "50s"}, 50 * time.Second},
	} {
		got, err := jsonKeepAlive(env(c.env))
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	for _, v := range []string{"soon", "-1s"} {
		if _, err := New(context.Background(), Options{Getenv: env(map[string]string{EnvJSONKeepAlive: v})}); err == nil ||
			!strings.Contains(err.Error(), `BUZZGATE_JSON_KEEPALIVE="`+v+`"`) {
			t.Errorf("%q: %v", v, err)
		}
	}
}
