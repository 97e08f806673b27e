package dynamoledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// maxPriceAttempts bounds the rounds of price when the entry keeps
// appearing and disappearing (a Reconcile writing it off between two
// writes); never more than two in practice.
const maxPriceAttempts = 4

// Hold implements billing.Ledger: a PutItem of the due pointer, then a
// conditional PutItem of the entry item in state held. The pointer goes
// first so that no entry exists that Reconcile cannot find.
func (s *Store) Hold(ctx context.Context, h billing.Hold) error {
	h, err := billing.PrepareHold(h)
	if err != nil {
		return err
	}
	hpk, hsk := s.holdPK(h.RequestID), holdSK(h.Deadline, h.RequestID)
	if err := s.putPointer(ctx, hpk, hsk, h.RequestID); err != nil {
		return err
	}
	item := key(PKRequest+h.RequestID, SKEntry)
	item[attrProject], item[attrKeyID], item[attrAt] = attrS(h.Project), attrS(h.KeyID), attrS(formatTime(h.At))
	if h.Model != "" {
		item[attrModel] = attrS(h.Model)
	}
	item[attrDeadline], item[attrHoldPK], item[attrHoldSK] = attrS(formatTime(h.Deadline)), attrS(hpk), attrS(hsk)
	item[attrState] = attrS(stateHeld)
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": AttrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	old, err := s.found(ctx, "PutItem", err, PKRequest+h.RequestID, SKEntry)
	switch {
	case err != nil:
		return err
	case old == nil:
		// Written off between the two calls: a hold again is a new hold.
		return s.Hold(ctx, h)
	}
	at, err := parseTime(str(old, attrAt))
	if err != nil {
		return err
	}
	// The same request is a retry of the Hold, or priced or billed already.
	return billing.CheckHeld(billing.Hold{RequestID: h.RequestID, Project: str(old, attrProject), KeyID: str(old, attrKeyID), Model: str(old, attrModel), At: at}, h)
}

// Price implements billing.Ledger: on a held entry one UpdateItem (state
// pending, the cost), else see price.
func (s *Store) Price(ctx context.Context, e billing.Entry) error {
	e, err := billing.PrepareEntry(e)
	if err != nil {
		return err
	}
	_, _, err = s.price(ctx, e)
	return err
}

// price makes the entry pending (step 1 of Bill) and returns its state and
// item: on a held entry of the same request, one conditional UpdateItem; on
// no entry (no Hold, or written off), a due pointer due now and a
// conditional PutItem; on an entry priced or billed already, the payload
// is compared (ErrLedgerCollision).
func (s *Store) price(ctx context.Context, e billing.Entry) (string, map[string]types.AttributeValue, error) {
	for range maxPriceAttempts {
		names := map[string]string{"#st": attrState, "#project": attrProject, "#kid": attrKeyID, "#at": attrAt, "#model": attrModel,
			"#pt": attrPrompt, "#ct": attrComplete, "#cost": attrCost}
		values := map[string]types.AttributeValue{":held": attrS(stateHeld), ":pending": attrS(statePending),
			":p": attrS(e.Project), ":k": attrS(e.KeyID), ":at": attrS(formatTime(e.At)),
			":pt": attrN(int64(e.PromptTokens)), ":ct": attrN(int64(e.CompletionTokens)), ":cost": attrN(e.CostNanos)}
		cond := "#st = :held AND #project = :p AND #kid = :k AND #at = :at AND "
		if e.Model == "" {
			cond += "attribute_not_exists(#model)"
		} else {
			cond += "#model = :m"
			values[":m"] = attrS(e.Model)
		}
		set := "SET #st = :pending, #pt = :pt, #ct = :ct, #cost = :cost"
		if e.Provider != "" {
			names["#prov"], values[":prov"] = attrProvider, attrS(e.Provider)
			set += ", #prov = :prov"
		}
		item, done, err := s.updateIf(ctx, PKRequest+e.RequestID, SKEntry, set, cond, names, values)
		switch {
		case err != nil:
			return "", nil, err
		case done:
			return statePending, item, nil
		case item == nil:
			priced, err := s.putPriced(ctx, e)
			if err != nil || priced != nil {
				return statePending, priced, err
			}
			continue // written meanwhile: look again
		}
		state := str(item, attrState)
		if state == stateHeld {
			return "", nil, billing.ErrLedgerCollision // held for another request
		}
		got, err := decodeEntry(item, e.RequestID)
		if err != nil {
			return "", nil, err
		}
		if err := billing.CheckBilled(got, e); err != nil {
			return "", nil, err
		}
		return state, item, nil
	}
	return "", nil, fmt.Errorf("%w: dynamoledger: the entry of %s kept changing", billing.ErrUnavailable, e.RequestID)
}

// putPriced writes a pending entry where there is none, with a due
// pointer due now, written first; nil when an entry appeared meanwhile.
func (s *Store) putPriced(ctx context.Context, e billing.Entry) (map[string]types.AttributeValue, error) {
	hpk, hsk := s.holdPK(e.RequestID), holdSK(s.opts.Now(), e.RequestID)
	if err := s.putPointer(ctx, hpk, hsk, e.RequestID); err != nil {
		return nil, err
	}
	item := entryItem(e, statePending)
	item[attrHoldPK], item[attrHoldSK] = attrS(hpk), attrS(hsk)
	if created, err := s.putNew(ctx, item); err != nil || !created {
		return nil, err
	}
	return item, nil
}

func (s *Store) putPointer(ctx context.Context, hpk, hsk, requestID string) error {
	item := key(hpk, hsk)
	item[attrRequestID] = attrS(requestID)
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return unavailable("PutItem", err)
	}
	return nil
}

func (s *Store) deletePointer(ctx context.Context, hpk, hsk string) error {
	if hpk == "" || hsk == "" {
		return nil
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(hpk, hsk)})
	if err != nil {
		return unavailable("DeleteItem", err)
	}
	return nil
}

// Unhold implements billing.Ledger: a DeleteItem of the entry on the
// condition that it is held (by this project), then of its due pointer.
func (s *Store) Unhold(ctx context.Context, project, requestID string) error {
	if err := billing.ValidateUnhold(project, requestID); err != nil {
		return err
	}
	_, err := s.writeOff(ctx, project, requestID, "")
	return err
}

// writeOff deletes a held entry (of project, and with due pointer hsk when
// not empty) and then its pointer; done is false when the entry was not
// held (priced, billed, absent or another's).
func (s *Store) writeOff(ctx context.Context, project, requestID, hsk string) (done bool, err error) {
	names := map[string]string{"#st": attrState, "#project": attrProject}
	values := map[string]types.AttributeValue{":held": attrS(stateHeld), ":p": attrS(project)}
	cond := "#st = :held AND #project = :p"
	if hsk != "" {
		names["#hsk"], values[":hsk"] = attrHoldSK, attrS(hsk)
		cond += " AND #hsk = :hsk"
	}
	out, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PKRequest+requestID, SKEntry),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllOld,
	})
	switch {
	case failed(err):
		return false, nil
	case err != nil:
		return false, unavailable("DeleteItem", err)
	}
	return true, s.deletePointer(ctx, str(out.Attributes, attrHoldPK), str(out.Attributes, attrHoldSK))
}

// pointer is a due pointer found by Reconcile.
type pointer struct {
	pk, sk    string
	requestID string
	deadline  time.Time
}

// Reconcile implements billing.Reconciler. Per hold partition (HoldShards
// of them), a consistent Query reads a page of the pointers due before now
// (ReconcilePage at most), one consistent BatchGetItem their entries, and
// each is settled before the next page is read: priced (pending) is
// billed; held is written off (a conditional DeleteItem, then the
// pointer's); applied, or a stray pointer (its entry has another, or none
// for StrayAfter past its deadline), loses its pointer. An entry that
// cannot be settled is skipped and reported (Reconciliation.Skipped); the
// run stops only when the store cannot be reached (a Query or a page's
// entries, or maxUnreachable entries in a row).
func (s *Store) Reconcile(ctx context.Context, now time.Time, apply bool) (billing.Reconciliation, error) {
	var r billing.Reconciliation
	unreachable := 0 // entries in a row that failed with the store unreachable
	for i := range s.opts.HoldShards {
		pk := fmt.Sprintf("%s%02d", PKHold, i)
		in := &dynamodb.QueryInput{
			TableName:                aws.String(s.table),
			KeyConditionExpression:   aws.String("#pk = :pk AND #sk < :now"),
			ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#sk": AttrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": attrS(pk), ":now": attrS(formatTime(clampTime(now))),
			},
			ConsistentRead: aws.Bool(true),
			Limit:          aws.Int32(int32(s.opts.ReconcilePage)),
		}
		for {
			out, err := s.client.Query(ctx, in)
			if err != nil {
				return r, unavailable("Query", err)
			}
			var ptrs []pointer
			for _, item := range out.Items {
				sk := str(item, AttrSK)
				dl, rid, ok := strings.Cut(sk, "#")
				t, err := parseTime(dl)
				if !ok || err != nil {
					continue // not a pointer of this package
				}
				ptrs = append(ptrs, pointer{pk: pk, sk: sk, requestID: rid, deadline: t})
			}
			rids := make([]string, len(ptrs))
			for i, p := range ptrs {
				rids[i] = p.requestID
			}
			items, err := s.getEntries(ctx, rids)
			if err != nil {
				return r, err
			}
			for _, p := range ptrs {
				item, ok := items[p.requestID]
				err := s.reconcileOne(ctx, &r, p, item, ok, now, apply)
				switch {
				case err == nil:
					unreachable = 0
					continue
				case ctx.Err() != nil:
					return r, unavailable("Reconcile", ctx.Err())
				case errors.Is(err, billing.ErrUnavailable):
					if unreachable++; unreachable >= maxUnreachable {
						return r, err
					}
				}
				r.Skipped = append(r.Skipped, billing.Skip{RequestID: p.requestID, Project: str(item, attrProject), Reason: err.Error()})
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return r, nil
}

// maxUnreachable is how many entries in a row Reconcile skips because the
// store could not be reached before it stops: then the store is gone, not
// one item busy.
const maxUnreachable = 3

// reconcileOne settles the entry of one due pointer p (item, when found)
// into r.
func (s *Store) reconcileOne(ctx context.Context, r *billing.Reconciliation, p pointer, item map[string]types.AttributeValue, found bool, now time.Time, apply bool) error {
	// settle bills the priced entry of item (without apply, it only reports
	// it).
	settle := func(item map[string]types.AttributeValue) error {
		e, err := decodeEntry(item, p.requestID)
		if err != nil {
			return err
		}
		if !apply {
			r.Settled = append(r.Settled, e)
			return nil
		}
		applied, err := s.bill(ctx, e, true)
		if applied {
			r.Settled = append(r.Settled, e)
		}
		return err
	}
	mine := found && str(item, attrHoldPK) == p.pk && str(item, attrHoldSK) == p.sk
	switch {
	case !found && !p.deadline.Add(s.opts.StrayAfter).Before(now):
		// A Hold, Price or Bill may be between its two writes: wait.
	case !found, !mine, str(item, attrState) == stateApplied:
		if apply {
			return s.deletePointer(ctx, p.pk, p.sk)
		}
	case str(item, attrState) == statePending:
		return settle(item)
	case str(item, attrState) == stateHeld:
		h, err := decodeHold(item, p.requestID)
		if err != nil {
			return err
		}
		if !apply {
			r.WrittenOff = append(r.WrittenOff, h)
			return nil
		}
		done, err := s.writeOff(ctx, h.Project, h.RequestID, p.sk)
		if err != nil {
			return err
		}
		if done {
			r.WrittenOff = append(r.WrittenOff, h)
			return nil
		}
		// Priced (or billed) meanwhile: settle it now.
		again, err := s.getEntry(ctx, p.requestID)
		if err != nil {
			return err
		}
		if str(again, attrState) == statePending {
			return settle(again)
		}
	default:
		return fmt.Errorf("dynamoledger: entry %s in an unknown state %q", p.requestID, str(item, attrState))
	}
	return nil
}
