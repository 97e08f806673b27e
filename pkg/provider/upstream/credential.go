package upstream

import "sync/atomic"

// Credential is an upstream key read when each call is made, for a key
// that may change while the gateway runs (a secret rotated in Secrets
// Manager). Value is the header value for the current key, made once per
// key, so a call allocates nothing for it.
type Credential struct {
	get    func() string
	prefix string
	cur    atomic.Pointer[credValue]
}

type credValue struct {
	key   string
	value []string
}

// NewCredential reads the key with get at each call; the header value is
// prefix + key ("Bearer " for an Authorization header, "" for x-api-key).
func NewCredential(prefix string, get func() string) *Credential {
	return &Credential{get: get, prefix: prefix}
}

// Value is the header value for the current key, nil when it is empty. The
// slice is shared: callers only read it.
func (c *Credential) Value() []string {
	key := c.get()
	if key == "" {
		return nil
	}
	if v := c.cur.Load(); v != nil && v.key == key {
		return v.value
	}
	v := &credValue{key: key, value: []string{c.prefix + key}}
	c.cur.Store(v)
	return v.value
}
