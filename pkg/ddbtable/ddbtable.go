// Package ddbtable owns buzzgate's one DynamoDB table: its key schema, its
// TTL attribute and its creation. The idempotency store (dynamostore), the
// ledger (dynamoledger) and the admin tool share the table; the SAM template
// declares the same schema (internal/templatetest checks it against these
// names).
package ddbtable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Key and TTL attributes of the table.
const (
	AttrPK  = "pk"  // S, partition key
	AttrSK  = "sk"  // S, sort key
	AttrTTL = "ttl" // N, unix seconds: DynamoDB's TTL attribute
)

// EnsureTable makes sure the table exists and is ACTIVE: when DescribeTable
// does not find it, it creates it (on-demand billing, key pk (S, HASH) and sk
// (S, RANGE)); a ResourceInUseException there means another instance created
// it at the same time, which is fine. It then waits (within ctx) until the
// table is ACTIVE. A table it found missing also gets TTL on AttrTTL enabled,
// best effort: the error is ignored (dynalite does not implement
// UpdateTimeToLive; in AWS the SAM template creates the table with its TTL).
// A table that exists is used as it is: that needs only
// dynamodb:DescribeTable.
func EnsureTable(ctx context.Context, client *dynamodb.Client, table string) error {
	status, err := describeStatus(ctx, client, table)
	if err == nil && status == types.TableStatusActive {
		return nil
	}
	var notFound *types.ResourceNotFoundException
	created := false
	if errors.As(err, &notFound) {
		_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:   aws.String(table),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
			},
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fail("CreateTable", err)
		}
		created = true
	} else if err != nil {
		return fail("DescribeTable", err)
	}

	delay := 50 * time.Millisecond
	for {
		status, err = describeStatus(ctx, client, table)
		if err == nil && status == types.TableStatusActive {
			break
		}
		// Right after a CreateTable, DescribeTable may not see the table
		// yet (eventual consistency): keep polling.
		if err != nil && !errors.As(err, &notFound) {
			return fail("DescribeTable", err)
		}
		select {
		case <-ctx.Done():
			return fail("DescribeTable", fmt.Errorf("table %s is not ACTIVE (status %q): %w", table, status, ctx.Err()))
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}

	if created {
		_, _ = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(table),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(AttrTTL),
				Enabled:       aws.Bool(true),
			},
		})
	}
	return nil
}

func describeStatus(ctx context.Context, client *dynamodb.Client, table string) (types.TableStatus, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", err
	}
	if out.Table == nil {
		return "", nil
	}
	return out.Table.TableStatus, nil
}

func fail(op string, err error) error {
	return fmt.Errorf("ddbtable: dynamodb %s: %w", op, err)
}
