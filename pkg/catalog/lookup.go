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
	if c.idx != nil {
		i, ok := c.idx.providers[name]
		if !ok {
			return nil, false
		}
		return &c.Providers[i], true
	}
	// Not validated (a Config built in Go): fall back to a scan rather than
	// build the index lazily, which would race between goroutines.
	for i := range c.Providers {
		if c.Providers[i].Name == name {
			return &c.Providers[i], true
		}
	}
	return nil, false
}

// Model returns the model whose id is exactly id (the caller strips suffixes
// such as ":floor"). The pointer refers into c.Models: treat it as read-only.
func (c *Config) Model(id string) (*Model, bool) {
	if c.idx != nil {
		i, ok := c.idx.models[id]
		if !ok {
			return nil, false
		}
		return &c.Models[i], true
	}
	for i := range c.Models {
		if c.Models[i].ID == id {
			return &c.Models[i], true
		}
	}
	return nil, false
}

// Project returns the project whose id is id. The pointer refers into
// c.Projects: treat it as read-only.
func (c *Config) Project(id string) (*Project, bool) {
	if c.idx != nil {
		i, ok := c.idx.projects[id]
		if !ok {
			return nil, false
		}
		return &c.Projects[i], true
	}
	for i := range c.Projects {
		if c.Projects[i].ID == id {
			return &c.Projects[i], true
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
