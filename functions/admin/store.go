package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// requireProject fails unless the project exists.
func (e *env) requireProject(ctx context.Context, project string) error {
	ok, err := e.store.ProjectExists(ctx, project)
	if err != nil {
		return err
	}
	if !ok {
		return unknownProject(project)
	}
	return nil
}

// keyInfo is what the store says of a key id.
type keyInfo struct{ project string }

// keyByID finds the project of a key id.
func (e *env) keyByID(ctx context.Context, keyID string) (keyInfo, error) {
	p, err := e.store.KeyProject(ctx, keyID)
	if errors.Is(err, billing.ErrUnknownKey) {
		return keyInfo{}, unknownKey(keyID)
	}
	if err != nil {
		return keyInfo{}, err
	}
	return keyInfo{project: p}, nil
}

// requireKey fails unless the key exists and belongs to the project; it
// returns the key's status, active or revoked.
func (e *env) requireKey(ctx context.Context, project, keyID string) (string, error) {
	k, err := e.keyByID(ctx, keyID)
	if err != nil {
		return "", err
	}
	if k.project != project {
		return "", fmt.Errorf("key %s does not belong to project %q", keyID, project)
	}
	_, err = e.store.KeyByID(ctx, keyID)
	switch {
	case err == nil:
		return "active", nil
	case errors.Is(err, billing.ErrKeyRevoked):
		return "revoked", nil
	case errors.Is(err, billing.ErrUnknownKey):
		// The key id's item without its key's: an Issue that failed
		// between its two writes.
		return "", unknownKey(keyID)
	}
	return "", err
}
