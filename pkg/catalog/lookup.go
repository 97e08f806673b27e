package catalog

import (
	"crypto/sha256"
	"crypto/subtle"
)

// index is the lookup tables Validate builds, so that the per-request
// lookups are O(1). It holds positions rather than pointers: a shallow copy
// of a Config shares its slices, so the positions stay right in the copy, and
// the index is never written after Validate, so sharing it is safe.
type index struct {
	providers map[string]int
	models    map[string]int
	projects  map[string]int
	// keys is keyed by the SHA-256 of the key, so the table never holds a
	// secret and a lookup does not compare the presented token byte by byte
	// with stored keys.
	keys map[keyHash]keyRef
}

type keyHash [sha256.Size]byte

type keyRef struct{ project, key int }

func hashKey(k string) keyHash { return sha256.Sum256([]byte(k)) }

// Provider returns the provider named name. The pointer refers into
// c.Providers: treat it as read-only.
func (c *Config) Provider(name string) (*Provider, bool) {
	var pos map[string]int
	if c.idx != nil {
		pos = c.idx.providers
	}
	return find(c.Providers, pos, name, func(p *Provider) string { return p.Name })
}

// Model returns the model whose id is exactly id (the caller strips suffixes
// such as ":floor"). The pointer refers into c.Models: treat it as read-only.
func (c *Config) Model(id string) (*Model, bool) {
	var pos map[string]int
	if c.idx != nil {
		pos = c.idx.models
	}
	return find(c.Models, pos, id, func(m *Model) string { return m.ID })
}

// Project returns the project whose id is id. The pointer refers into
// c.Projects: treat it as read-only.
func (c *Config) Project(id string) (*Project, bool) {
	var pos map[string]int
	if c.idx != nil {
		pos = c.idx.projects
	}
	return find(c.Projects, pos, id, func(p *Project) string { return p.ID })
}

// find returns the element of list whose name (as name reads it) is want,
// from its position in pos. A nil pos is a Config that was not validated
// (built in Go): find scans list rather than build the index lazily, which
// would race between goroutines.
func find[T any](list []T, pos map[string]int, want string, name func(*T) string) (*T, bool) {
	if pos != nil {
		i, ok := pos[want]
		if !ok {
			return nil, false
		}
		return &list[i], true
	}
	for i := range list {
		if name(&list[i]) == want {
			return &list[i], true
		}
	}
	return nil, false
}

// KeyOwner finds the configured key equal to token (a bearer token) and the
// project it belongs to. The pointers refer into c.Projects: treat them as
// read-only.
func (c *Config) KeyOwner(token string) (*Project, *Key, bool) {
	if c.idx != nil {
		ref, ok := c.idx.keys[hashKey(token)]
		if !ok {
			return nil, nil, false
		}
		p := &c.Projects[ref.project]
		return p, &p.Keys[ref.key], true
	}
	for i := range c.Projects {
		p := &c.Projects[i]
		for j := range p.Keys {
			if subtle.ConstantTimeCompare([]byte(p.Keys[j].Key), []byte(token)) == 1 {
				return p, &p.Keys[j], true
			}
		}
	}
	return nil, nil, false
}
