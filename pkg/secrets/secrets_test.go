package secrets

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// client is a Secrets Manager client of the fake, signed with secret as
// its secret access key, without retries.
func client(fake *providertest.SecretsManager, secret string) *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:       providertest.BedrockRegion,
		BaseEndpoint: aws.String(fake.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider(providertest.BedrockAccessKeyID, secret, ""),
		Retryer:      aws.NopRetryer{},
	})
}

type counter struct {
	mu sync.Mutex
	n  map[string]float64
}

func (c *counter) Count(metric string, n float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]float64{}
	}
	c.n[metric] += n
}

func (c *counter) get(metric string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[metric]
}

// TestRotation: the values are read at Open and again, in the background,
// once older than the refresh interval: a rotated key is used without a
// restart; a failed read keeps the last good values, logs a warning
// without them and counts SecretRefreshFailures.
func TestRotation(t *testing.T) {
	fake := providertest.NewSecretsManager(t)
	fake.Set("buzzgate/providers", `{"ALPHA_API_KEY":"sk-one","KEY_PEPPER":"pepper"}`)
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var logs bytes.Buffer
	var m counter
	s, err := Open(context.Background(), client(fake, providertest.BedrockSecretAccessKey), "buzzgate/providers",
		Options{Refresh: time.Minute, Now: clock, Log: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: &m})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Get("ALPHA_API_KEY"); v != "sk-one" || !ok {
		t.Fatalf("ALPHA_API_KEY = %q, %v", v, ok)
	}
	if _, ok := s.Get("BETA_API_KEY"); ok {
		t.Error("a name the secret lacks")
	}
	fake.Set("buzzgate/providers", `{"ALPHA_API_KEY":"sk-two","KEY_PEPPER":"pepper"}`)
	s.Get("ALPHA_API_KEY")
	s.Wait()
	if v, _ := s.Get("ALPHA_API_KEY"); v != "sk-one" || fake.Calls() != 1 {
		t.Errorf("within the interval: %q after %d reads; want the first value, one read", v, fake.Calls())
	}
	advance(time.Minute)
	s.Get("ALPHA_API_KEY") // starts the read
	s.Wait()
	if v, _ := s.Get("ALPHA_API_KEY"); v != "sk-two" || fake.Calls() != 2 {
		t.Errorf("after the interval: %q after %d reads; want the rotated value", v, fake.Calls())
	}

	fake.Set("buzzgate/providers", `{"ALPHA_API_KEY":"sk-three"}`)
	fake.FailNext(1)
	advance(time.Minute)
	s.Get("ALPHA_API_KEY")
	s.Wait()
	if v, _ := s.Get("ALPHA_API_KEY"); v != "sk-two" || m.get("SecretRefreshFailures") != 1 {
		t.Errorf("a failed read: %q, %v failures counted; want the last good value and 1", v, m.get("SecretRefreshFailures"))
	}
	if !strings.Contains(logs.String(), "provider secret not refreshed") || strings.Contains(logs.String(), "sk-") {
		t.Errorf("log:\n%s", logs.String())
	}
	advance(time.Minute)
	s.Get("ALPHA_API_KEY")
	s.Wait()
	if v, _ := s.Get("ALPHA_API_KEY"); v != "sk-three" {
		t.Errorf("the read after a failure: %q", v)
	}
}

// TestOpenFails: the gateway does not start without its keys: a missing
// secret, a value that is not a JSON object of strings (the error does not
// quote it), credentials that do not sign.
func TestOpenFails(t *testing.T) {
	fake := providertest.NewSecretsManager(t)
	fake.Set("not-json", `sk-plain-value`)
	fake.Set("numbers", `{"A":1}`)
	for _, c := range []struct{ id, secret, want string }{
		{"missing", providertest.BedrockSecretAccessKey, "ResourceNotFoundException"},
		{"not-json", providertest.BedrockSecretAccessKey, "not a JSON object of strings"},
		{"numbers", providertest.BedrockSecretAccessKey, "not a JSON object of strings"},
		{"numbers", "wrong", "InvalidSignatureException"},
	} {
		_, err := Open(context.Background(), client(fake, c.secret), c.id, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "sk-plain") {
			t.Errorf("%s: %v, want an error saying %q", c.id, err, c.want)
		}
	}
}
