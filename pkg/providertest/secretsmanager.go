package providertest

import (
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// SecretsManager is a fake AWS Secrets Manager on loopback that answers
// GetSecretValue (the awsJson1_1 protocol: POST / with X-Amz-Target
// secretsmanager.GetSecretValue). Every request must be signed with
// Signature Version 4 for service "secretsmanager", BedrockRegion and
// BedrockCredentials (checked with the SDK's own signer), else it gets a
// 400 InvalidSignatureException. URL is the endpoint for the SDK's
// override.
type SecretsManager struct {
	url string
	srv *http.Server

	mu      sync.Mutex
	secrets map[string]string
	fail    int // the next fail reads get a 500

	calls atomic.Int64
}

// NewSecretsManager starts the fake; it is closed when the test ends.
func NewSecretsManager(tb testing.TB) *SecretsManager {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("providertest: listen: %v", err)
	}
	s := &SecretsManager{url: "http://" + ln.Addr().String(), secrets: map[string]string{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = s.srv.Serve(ln) }()
	tb.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// URL is the endpoint, http://127.0.0.1:PORT.
func (s *SecretsManager) URL() string { return s.url }

// Set gives the secret named id the SecretString value (a rotation when
// it had one).
func (s *SecretsManager) Set(id, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[id] = value
}

// FailNext makes the next n reads fail with a 500 InternalServiceError.
func (s *SecretsManager) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = n
}

// Calls is the number of signed GetSecretValue calls received.
func (s *SecretsManager) Calls() int { return int(s.calls.Load()) }

func (s *SecretsManager) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(status)
		_, _ = w.Write(marshal(map[string]string{"__type": typ, "message": msg}))
	}
	if err := verifySigV4(r, body, "secretsmanager"); err != nil {
		fail(http.StatusBadRequest, "InvalidSignatureException", err.Error())
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
		fail(http.StatusBadRequest, "UnknownOperationException", "only GetSecretValue is served")
		return
	}
	var in struct{ SecretId string }
	if json.Unmarshal(body, &in) != nil {
		fail(http.StatusBadRequest, "InvalidRequestException", "malformed request")
		return
	}
	s.calls.Add(1)
	s.mu.Lock()
	value, ok := s.secrets[in.SecretId]
	failing := s.fail > 0
	if failing {
		s.fail--
	}
	s.mu.Unlock()
	switch {
	case failing:
		fail(http.StatusInternalServerError, "InternalServiceError", "scripted failure")
	case !ok:
		fail(http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	default:
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write(marshal(map[string]any{
			"ARN":  "arn:aws:secretsmanager:" + BedrockRegion + ":123456789012:secret:" + in.SecretId + "-AbCdEf",
			"Name": in.SecretId, "SecretString": value, "VersionId": "v1", "VersionStages": []string{"AWSCURRENT"},
			"CreatedDate": 1.7e9,
		}))
	}
}
