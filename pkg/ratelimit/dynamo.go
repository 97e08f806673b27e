package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/ddbtable"
)

// PKPrefix begins the partition key of a counter's window item:
// rl#<scope>#<id>, sort key the window's unix minute.
const PKPrefix = "rl#"

// Dynamo is a Limiter on the gateway's DynamoDB table, shared by every
// instance: a counter's window is one item (pk rl#<scope>#<id>, sk the
// unix minute: requests r, tokens t, and a ttl an hour after the window),
// and a Take is one conditional UpdateItem per counter (the condition is
// the limit), so that no instance counts past it. A counter refused after
// others were taken gives theirs back.
type Dynamo struct {
	client *dynamodb.Client
	table  string
}

// NewDynamo returns a Dynamo on table.
func NewDynamo(client *dynamodb.Client, table string) *Dynamo {
	return &Dynamo{client: client, table: table}
}

func (d *Dynamo) key(c Counter, w int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		ddbtable.AttrPK: &types.AttributeValueMemberS{Value: PKPrefix + c.Scope + "#" + c.ID},
		ddbtable.AttrSK: &types.AttributeValueMemberS{Value: strconv.FormatInt(w, 10)},
	}
}

func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// Take implements Limiter.
func (d *Dynamo) Take(ctx context.Context, now time.Time, counters []Counter, reserve int64) (Taken, []Usage, error) {
	w := WindowOf(now)
	taken := Taken{Window: w, Reserved: reserve}
	usages := make([]Usage, 0, len(counters))
	for _, c := range counters {
		values := map[string]types.AttributeValue{":one": n(1), ":t": n(reserve), ":ttl": n(windowEnd(w).Add(time.Hour).Unix())}
		cond := ""
		if c.Limit.RPM > 0 {
			cond = "(attribute_not_exists(r) OR r < :rpm)"
			values[":rpm"] = n(c.Limit.RPM)
		}
		if c.Limit.TPM > 0 {
			if cond != "" {
				cond += " AND "
			}
			cond += "(attribute_not_exists(t) OR t <= :room)"
			values[":room"] = n(c.Limit.TPM - reserve)
		}
		if !fits(c.Limit, 0, 0, reserve) {
			// More tokens than a whole window holds: it never fits.
			d.giveBack(ctx, taken)
			return Taken{}, []Usage{{Scope: c.Scope, Limit: c.Limit, Reset: windowEnd(w)}}, ErrLimited
		}
		in := &dynamodb.UpdateItemInput{
			TableName:                           aws.String(d.table),
			Key:                                 d.key(c, w),
			UpdateExpression:                    aws.String("ADD r :one, t :t SET #ttl = :ttl"),
			ExpressionAttributeNames:            map[string]string{"#ttl": ddbtable.AttrTTL},
			ExpressionAttributeValues:           values,
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		if cond != "" {
			in.ConditionExpression = aws.String(cond)
		}
		out, err := d.client.UpdateItem(ctx, in)
		if err != nil {
			var ccf *types.ConditionalCheckFailedException
			if !errors.As(err, &ccf) {
				d.giveBack(ctx, taken)
				return Taken{}, nil, fmt.Errorf("%w: UpdateItem: %v", ErrUnavailable, err)
			}
			d.giveBack(ctx, taken)
			item := ccf.Item
			if len(item) == 0 {
				// A store that does not send the item back with the
				// failure (DynamoDB Local, dynalite): read it.
				if got, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: d.key(c, w), ConsistentRead: aws.Bool(true)}); err == nil {
					item = got.Item
				}
			}
			r, t := counts(item)
			return Taken{}, []Usage{{Scope: c.Scope, Limit: c.Limit, Requests: r, Tokens: t, Reset: windowEnd(w)}}, ErrLimited
		}
		taken.Counters = append(taken.Counters, c)
		r, t := counts(out.Attributes)
		usages = append(usages, Usage{Scope: c.Scope, Limit: c.Limit, Requests: r, Tokens: t, Reset: windowEnd(w)})
	}
	return taken, usages, nil
}

// giveBack undoes what a refused Take counted, best effort: what is left
// counted only makes the window stricter.
func (d *Dynamo) giveBack(ctx context.Context, t Taken) {
	for _, c := range t.Counters {
		_, _ = d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(d.table),
			Key:                       d.key(c, t.Window),
			UpdateExpression:          aws.String("ADD r :r, t :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": n(-1), ":t": n(-t.Reserved)},
		})
	}
}

// Adjust implements Limiter: one UpdateItem per counter (ADD), onto the
// window the request was counted in.
func (d *Dynamo) Adjust(ctx context.Context, t Taken, delta int64) error {
	if delta == 0 {
		return nil
	}
	var errs []error
	for _, c := range t.Counters {
		_, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(d.table),
			Key:                       d.key(c, t.Window),
			UpdateExpression:          aws.String("ADD t :d"),
			ConditionExpression:       aws.String("attribute_exists(" + ddbtable.AttrPK + ")"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":d": n(delta)},
		})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: UpdateItem: %v", ErrUnavailable, err)
	}
	return nil
}

// Carry implements Limiter: one UpdateItem per counter (ADD, no
// condition), onto the window of now.
func (d *Dynamo) Carry(ctx context.Context, t Taken, now time.Time, tokens int64) (Taken, error) {
	w := WindowOf(now)
	if w <= t.Window {
		return t, nil
	}
	var errs []error
	for _, c := range t.Counters {
		_, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(d.table),
			Key:                       d.key(c, w),
			UpdateExpression:          aws.String("ADD t :t SET #ttl = :ttl"),
			ExpressionAttributeNames:  map[string]string{"#ttl": ddbtable.AttrTTL},
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": n(tokens), ":ttl": n(windowEnd(w).Add(time.Hour).Unix())},
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	carried := Taken{Counters: t.Counters, Window: w, Reserved: tokens}
	if err := errors.Join(errs...); err != nil {
		return carried, fmt.Errorf("%w: UpdateItem: %v", ErrUnavailable, err)
	}
	return carried, nil
}

// counts reads a window item's requests and tokens.
func counts(item map[string]types.AttributeValue) (requests, tokens int64) {
	num := func(name string) int64 {
		if v, ok := item[name].(*types.AttributeValueMemberN); ok {
			x, _ := strconv.ParseInt(v.Value, 10, 64)
			return x
		}
		return 0
	}
	return num("r"), num("t")
}
