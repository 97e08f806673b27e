package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/billing/dynamoledger"
)

// Attributes of dynamoledger's items that this program reads itself:
// neither billing.Ledger nor billing.KeyStore says whether a project exists
// (Account answers "unlimited, nothing spent" for any id) or which project
// a key id belongs to. The tests run every command against the real store,
// so a renamed attribute fails them.
const (
	// attrCreated is set on the account item (pk acct#<project>) by
	// CreateProject and Seed: the project exists (Issue checks the same).
	attrCreated = "created"
	// attrProject and attrHash are on the key id item (pk keyid#<key id>).
	attrProject = "project"
	attrHash    = "hash"
)

// keyInfo is what the key id item says of a key.
type keyInfo struct {
	project string
	hash    string
}

// requireProject fails unless the project exists.
func (e *env) requireProject(ctx context.Context, project string) error {
	item, err := e.get(ctx, dynamoledger.PKAccount+project, dynamoledger.SKAccount, attrCreated)
	if err != nil {
		return err
	}
	if _, ok := item[attrCreated]; !ok {
		return unknownProject(project)
	}
	return nil
}

// keyByID reads the key id item of a key.
func (e *env) keyByID(ctx context.Context, keyID string) (keyInfo, error) {
	item, err := e.get(ctx, dynamoledger.PKKeyID+keyID, dynamoledger.SKKeyID, attrProject, attrHash)
	if err != nil {
		return keyInfo{}, err
	}
	k := keyInfo{project: str(item, attrProject), hash: str(item, attrHash)}
	if k.project == "" || k.hash == "" {
		return keyInfo{}, unknownKey(keyID)
	}
	return k, nil
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
	_, err = e.store.Lookup(ctx, k.hash)
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

// get reads some attributes of an item (consistent); an absent item is an
// empty map.
func (e *env) get(ctx context.Context, pk, sk string, attrs ...string) (map[string]types.AttributeValue, error) {
	in := &dynamodb.GetItemInput{
		TableName: aws.String(e.table),
		Key: map[string]types.AttributeValue{
			dynamoledger.AttrPK: &types.AttributeValueMemberS{Value: pk},
			dynamoledger.AttrSK: &types.AttributeValueMemberS{Value: sk},
		},
		ConsistentRead: aws.Bool(true),
	}
	if len(attrs) > 0 {
		names := map[string]string{}
		proj := ""
		for i, a := range attrs {
			ph := fmt.Sprintf("#a%d", i)
			names[ph] = a
			if i > 0 {
				proj += ", "
			}
			proj += ph
		}
		in.ProjectionExpression = aws.String(proj)
		in.ExpressionAttributeNames = names
	}
	out, err := e.client.GetItem(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("%w: dynamodb GetItem: %w", billing.ErrUnavailable, err)
	}
	if out.Item == nil {
		return map[string]types.AttributeValue{}, nil
	}
	return out.Item, nil
}

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
