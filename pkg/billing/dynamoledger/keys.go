package dynamoledger

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/billing"
	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// maxIssueAttempts bounds the retries of Issue on an id or hash collision
// (64 random bits of id: never in practice).
const maxIssueAttempts = 4

// Lookup implements billing.KeyStore: one consistent GetItem.
func (s *Store) Lookup(ctx context.Context, hash string) (billing.KeyRecord, error) {
	if billing.ValidateID("key hash", hash) != nil {
		return billing.KeyRecord{}, billing.ErrUnknownKey
	}
	item, err := s.get(ctx, PKKey+hash, SKKey)
	if err != nil {
		return billing.KeyRecord{}, err
	}
	if item == nil {
		return billing.KeyRecord{}, billing.ErrUnknownKey
	}
	rec, err := decodeKey(item, hash)
	if err != nil {
		return billing.KeyRecord{}, err
	}
	if rec.Revoked {
		return rec, billing.ErrKeyRevoked
	}
	return rec, nil
}

func decodeKey(item map[string]types.AttributeValue, hash string) (billing.KeyRecord, error) {
	rec := billing.KeyRecord{Hash: hash, Project: str(item, attrProject), KeyID: str(item, attrKeyID)}
	if v, ok := item[attrRevoked].(*types.AttributeValueMemberBOOL); ok {
		rec.Revoked = v.Value
	}
	created, err := parseTime(str(item, attrCreated))
	if err != nil {
		return billing.KeyRecord{}, err
	}
	rec.CreatedAt = created
	if rec.Rates, err = decodeRates(item); err != nil {
		return billing.KeyRecord{}, err
	}
	return rec, nil
}

// decodeRates reads the rates and budget of a key's or an account's item.
func decodeRates(item map[string]types.AttributeValue) (billing.Rates, error) {
	var r billing.Rates
	var errs [3]error
	r.RPM, _, errs[0] = num(item, attrRPM)
	r.TPM, _, errs[1] = num(item, attrTPM)
	if period := str(item, attrBudgetPeriod); period != "" {
		var amount int64
		amount, _, errs[2] = num(item, attrBudgetNanos)
		r.Budget = &catalog.Budget{Amount: billing.NanosToUSD(amount), Period: period}
	}
	return r, errors.Join(errs[:]...)
}

// ratesUpdate is the update expression, names and values that set r on an
// item (the budget's attributes removed when it has none).
func ratesUpdate(r billing.Rates) (string, map[string]string, map[string]types.AttributeValue) {
	names := map[string]string{"#rpm": attrRPM, "#tpm": attrTPM, "#bn": attrBudgetNanos, "#bp": attrBudgetPeriod}
	values := map[string]types.AttributeValue{":rpm": attrN(r.RPM), ":tpm": attrN(r.TPM)}
	if b := r.Budget; b != nil {
		values[":bn"], values[":bp"] = attrN(billing.USDToNanos(b.Amount)), attrS(b.Period)
		return "SET #rpm = :rpm, #tpm = :tpm, #bn = :bn, #bp = :bp", names, values
	}
	return "SET #rpm = :rpm, #tpm = :tpm REMOVE #bn, #bp", names, values
}

// SetProjectRates implements billing.KeyStore: one UpdateItem of the
// account, on its having been created or seeded.
func (s *Store) SetProjectRates(ctx context.Context, project string, r billing.Rates) error {
	if err := errors.Join(billing.ValidateID("project", project), billing.ValidateRates(r)); err != nil {
		return err
	}
	expr, names, values := ratesUpdate(r)
	names["#created"] = attrCreated
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PKAccount+project, SKAccount),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("attribute_exists(#created)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return written("UpdateItem", err, billing.ErrUnknownProject)
}

// SetKeyRates implements billing.KeyStore: GetItem of the key id, UpdateItem
// of the key.
func (s *Store) SetKeyRates(ctx context.Context, keyID string, r billing.Rates) error {
	if err := billing.ValidateRates(r); err != nil {
		return err
	}
	item, err := s.getKeyID(ctx, keyID)
	if err != nil {
		return err
	}
	if item == nil {
		return billing.ErrUnknownKey
	}
	expr, names, values := ratesUpdate(r)
	names["#kid"], values[":kid"] = attrKeyID, attrS(keyID)
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PKKey+str(item, attrHash), SKKey),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#kid = :kid"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return written("UpdateItem", err, billing.ErrUnknownKey)
}

// Issue implements billing.KeyStore: it checks that the project exists (a
// GetItem), then writes the key id's item and the key's item (two
// conditional PutItems), in that order, so that a key that exists can
// always be revoked by its id.
func (s *Store) Issue(ctx context.Context, project string) (string, billing.KeyRecord, error) {
	if err := billing.ValidateID("project", project); err != nil {
		return "", billing.KeyRecord{}, err
	}
	switch exists, err := s.ProjectExists(ctx, project); {
	case err != nil:
		return "", billing.KeyRecord{}, err
	case !exists:
		return "", billing.KeyRecord{}, billing.ErrUnknownProject
	}
	for range maxIssueAttempts {
		raw, rec := billing.NewKey(s.opts.Pepper, project, s.opts.Now())
		created, err := s.putNew(ctx, keyIDItem(rec))
		if err != nil {
			return "", billing.KeyRecord{}, err
		}
		if !created {
			continue
		}
		if created, err = s.putNew(ctx, keyItem(rec)); err != nil {
			return "", billing.KeyRecord{}, err
		}
		if !created {
			continue
		}
		return raw, rec, nil
	}
	return "", billing.KeyRecord{}, errors.New("dynamoledger: Issue: no free key id")
}

func keyItem(rec billing.KeyRecord) map[string]types.AttributeValue {
	item := key(PKKey+rec.Hash, SKKey)
	item[attrProject] = attrS(rec.Project)
	item[attrKeyID] = attrS(rec.KeyID)
	item[attrRevoked] = &types.AttributeValueMemberBOOL{Value: false}
	item[attrCreated] = attrS(formatTime(rec.CreatedAt))
	return item
}

func keyIDItem(rec billing.KeyRecord) map[string]types.AttributeValue {
	item := key(PKKeyID+rec.KeyID, SKKeyID)
	item[attrHash] = attrS(rec.Hash)
	item[attrProject] = attrS(rec.Project)
	return item
}

// putNew writes item on attribute_not_exists(pk); created is false when
// the item exists.
func (s *Store) putNew(ctx context.Context, item map[string]types.AttributeValue) (created bool, err error) {
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
	})
	switch {
	case failed(err):
		return false, nil
	case err != nil:
		return false, unavailable("PutItem", err)
	}
	return true, nil
}

// get reads an item (consistent); nil when there is none.
func (s *Store) get(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, unavailable("GetItem", err)
	}
	if len(got.Item) == 0 {
		return nil, nil
	}
	return got.Item, nil
}

// getKeyID reads the item of a key id (consistent); nil when there is none,
// ErrUnknownKey for an id no key can have.
func (s *Store) getKeyID(ctx context.Context, keyID string) (map[string]types.AttributeValue, error) {
	if billing.ValidateID("key id", keyID) != nil {
		return nil, billing.ErrUnknownKey
	}
	return s.get(ctx, PKKeyID+keyID, SKKeyID)
}

// Revoke implements billing.KeyStore: GetItem of the key id, UpdateItem of
// the key.
func (s *Store) Revoke(ctx context.Context, keyID string) error {
	item, err := s.getKeyID(ctx, keyID)
	if err != nil {
		return err
	}
	if item == nil {
		return billing.ErrUnknownKey
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(PKKey+str(item, attrHash), SKKey),
		UpdateExpression:          aws.String("SET #rv = :true"),
		ConditionExpression:       aws.String("#kid = :kid"),
		ExpressionAttributeNames:  map[string]string{"#rv": attrRevoked, "#kid": attrKeyID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}, ":kid": attrS(keyID)},
	})
	// A failed condition: the id's item was written and its key's was not
	// (Issue failed between the two), or the hash belongs to another id (an
	// ImportKey that lost a race): there is no key of this id.
	return written("UpdateItem", err, billing.ErrUnknownKey)
}

// CreateProject implements billing.KeyStore: one UpdateItem on
// attribute_not_exists(created), which also sets the credit.
func (s *Store) CreateProject(ctx context.Context, id string, balance *int64) error {
	if err := billing.ValidateID("project", id); err != nil {
		return err
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      key(PKAccount+id, SKAccount),
		UpdateExpression:         aws.String("SET #created = :now, #cr = :b, #project = :project"),
		ConditionExpression:      aws.String("attribute_not_exists(#created)"),
		ExpressionAttributeNames: map[string]string{"#created": attrCreated, "#cr": attrCredit, "#project": attrProject},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": attrS(formatTime(s.opts.Now())), ":b": attrOptN(balance), ":project": attrS(id),
		},
	})
	return written("UpdateItem", err, billing.ErrProjectExists)
}

// ImportKey implements billing.KeyStore: a GetItem of the key (a known key
// is compared, and that is all), else the key id's item (conditional on
// being new or already this hash's), then the key's (conditional on being
// new).
func (s *Store) ImportKey(ctx context.Context, project, hash, keyID string) error {
	if err := billing.ValidateImportKey(project, hash, keyID); err != nil {
		return err
	}
	same := func(item map[string]types.AttributeValue) error {
		return billing.CheckImported(billing.KeyRecord{Project: str(item, attrProject), KeyID: str(item, attrKeyID)}, project, keyID)
	}
	// Known already (every start-up after the first): one read.
	item, err := s.get(ctx, PKKey+hash, SKKey)
	if err != nil || item != nil {
		if err != nil {
			return err
		}
		return same(item)
	}
	rec := billing.KeyRecord{Hash: hash, Project: project, KeyID: keyID, CreatedAt: s.opts.Now()}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      keyIDItem(rec),
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR (#hash = :hash AND #project = :project)"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#hash": attrHash, "#project": attrProject},
		ExpressionAttributeValues: map[string]types.AttributeValue{":hash": attrS(hash), ":project": attrS(project)},
	})
	if err := written("PutItem", err, billing.ErrKeyConflict); err != nil {
		return err
	}
	created, err := s.putNew(ctx, keyItem(rec))
	if err != nil || created {
		return err
	}
	// Another instance imported it meanwhile.
	if item, err = s.get(ctx, PKKey+hash, SKKey); err != nil {
		return err
	}
	if item == nil {
		return billing.ErrKeyConflict
	}
	return same(item)
}

// ProjectExists implements billing.KeyStore: one consistent GetItem of the
// account item.
func (s *Store) ProjectExists(ctx context.Context, project string) (bool, error) {
	if billing.ValidateID("project", project) != nil {
		return false, nil
	}
	got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      key(PKAccount+project, SKAccount),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#c"),
		ExpressionAttributeNames: map[string]string{"#c": attrCreated},
	})
	if err != nil {
		return false, unavailable("GetItem", err)
	}
	_, ok := got.Item[attrCreated]
	return ok, nil
}

// KeyProject implements billing.KeyStore: one consistent GetItem of the
// key id's item (a key id whose key item was never written, an Issue that
// failed between its two writes, is no key: see KeyByID).
func (s *Store) KeyProject(ctx context.Context, keyID string) (string, error) {
	item, err := s.getKeyID(ctx, keyID)
	if err != nil {
		return "", err
	}
	if p := str(item, attrProject); p != "" && str(item, attrHash) != "" {
		return p, nil
	}
	return "", billing.ErrUnknownKey
}

// KeyByID returns the record of a key by its id, like Lookup by its hash
// (ErrUnknownKey; the record and ErrKeyRevoked when it is revoked): two
// consistent GetItems.
func (s *Store) KeyByID(ctx context.Context, keyID string) (billing.KeyRecord, error) {
	item, err := s.getKeyID(ctx, keyID)
	if err != nil {
		return billing.KeyRecord{}, err
	}
	hash := str(item, attrHash)
	if hash == "" {
		return billing.KeyRecord{}, billing.ErrUnknownKey
	}
	rec, err := s.Lookup(ctx, hash)
	if rec.KeyID != "" && rec.KeyID != keyID {
		return billing.KeyRecord{}, billing.ErrUnknownKey
	}
	return rec, err
}
