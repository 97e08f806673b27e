package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/buzzgate/buzzgate/pkg/canonjson"
)

// MaxKeyLength bounds the Idempotency-Key header. Any non-empty string up to
// it works; a longer one is a clear 400.
const MaxKeyLength = 512

// Identity is the record key for one Idempotency-Key: a SHA-256 over the
// project, the API key's hash, the Idempotency-Key, the data-policy demand
// and the residency, each length-prefixed so that no two tuples can run
// together. A request under another demand or residency is another record,
// and the raw key is never stored.
func Identity(project string, apiKeyHash [32]byte, idempotencyKey, demand, residency string) string {
	// The tuple is written out whole and hashed once: a few hundred bytes,
	// on the stack unless the key is long.
	var buf [256]byte
	b := buf[:0]
	for _, part := range []string{"buzzgate-idem-v1", project, string(apiKeyHash[:]), idempotencyKey, demand, residency} {
		b = strconv.AppendInt(b, int64(len(part)), 10)
		b = append(b, ':')
		b = append(b, part...)
	}
	sum := sha256.Sum256(b)
	return hexString(sum[:])
}

// hexString is hex.EncodeToString with one allocation, the string, for
// up to 32 bytes.
func hexString(b []byte) string {
	var buf [2 * sha256.Size]byte
	if len(b) > sha256.Size {
		return hex.EncodeToString(b)
	}
	return string(buf[:hex.Encode(buf[:], b)])
}

// Fingerprint is the SHA-256 of the request: its method, its path and its
// body as canonical JSON without stream_options.include_usage (and without
// stream_options when that leaves it empty). Any other change to the body
// changes it. The body must be valid JSON (it was decoded already).
func Fingerprint(method, path string, body []byte) (string, error) {
	h := sha256.New()
	prefix := func(n int) {
		var b [24]byte
		h.Write(append(strconv.AppendInt(b[:0], int64(n), 10), ':'))
	}
	for _, part := range []string{method, path} {
		prefix(len(part))
		h.Write([]byte(part))
	}
	// The canonical body goes into the hash as it is written, after its
	// length, never whole in memory.
	if err := canonjson.WriteWithout(h, prefix, body, "stream_options", "include_usage"); err != nil {
		return "", err
	}
	var sum [sha256.Size]byte
	return hexString(h.Sum(sum[:0])), nil
}
