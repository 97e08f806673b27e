package dynamoledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buzzgate/buzzgate/pkg/billing"
)

// Key attributes (the table's key schema: ddbtable.EnsureTable).
const (
	AttrPK = "pk"
	AttrSK = "sk"
)

// Partition key prefixes and sort keys of the items of this package.
const (
	PKRequest        = "req#"    // + request id; sk SKEntry: the ledger entry
	SKEntry          = "ledger"  //
	PKLedger         = "ledger#" // + 2-digit shard + "#" + project; sk at + "#" + request id: the entry by time
	PKAccount        = "acct#"   // + project; sk SKAccount: created, credit, version
	SKAccount        = "acct"    //
	PKSpend          = "spend#"  // + 2-digit shard + "#" + project; sk SKSpend: a project spend counter
	SKSpend          = "spend"   //
	PKKeyAccount     = "kacct#"  // + key id; sk project: the key's spend counter and limit
	PKHold           = "hold#"   // + 2-digit hold shard; sk deadline + "#" + request id: a due pointer
	PKFeedback       = "fb#"     // + request id; sk SKUserPrefix + end user
	SKUserPrefix     = "user#"   //
	PKKey            = "key#"    // + key hash; sk SKKey: the key record
	SKKey            = "key"     //
	PKKeyID          = "keyid#"  // + key id; sk SKKeyID: the key's hash
	SKKeyID          = "keyid"   //
	attrLimit        = "limit"   // N or NULL, the key's limit (key item)
	attrVersion      = "ver"     // N, the account item's version (SetBalance)
	attrDeadline     = "deadline"
	attrHoldPK       = "hpk" // the entry's due pointer: pk
	attrHoldSK       = "hsk" // and sk
	attrMarker       = "m#"  // + 32 hex of sha256(request id): S, the request id (counter items)
	markerHexLen     = 32
	maxBatchGet      = 100
	stateApplied     = "applied"
	statePending     = "pending"
	stateHeld        = "held"
	timeLayout       = "2006-01-02T15:04:05.000000000Z" // UTC, fixed width: sorts as it reads
	attrProject      = "project"
	attrKeyID        = "key_id"
	attrModel        = "model"
	attrProvider     = "provider"
	attrPrompt       = "pt"
	attrComplete     = "ct"
	attrCost         = "cost"
	attrAt           = "at"
	attrState        = "state"
	attrRequestID    = "rid"
	attrCreated      = "created"
	attrCredit       = "credit"
	attrSpent        = "spent"
	attrEpoch        = "epoch"
	attrEndUser      = "end_user"
	attrScore        = "score"
	attrLabel        = "label"
	attrComment      = "comment"
	attrUpdated      = "updated"
	attrHash         = "hash"
	attrRevoked      = "revoked"
	attrRPM          = "rpm"        // an issued key's rpm
	attrTPM          = "tpm"        // and tpm
	attrBudgetNanos  = "budget"     // its budget (nano-USD)
	attrBudgetPeriod = "budget_per" // and the budget's period
)

func attrS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func attrN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

var attrNull types.AttributeValue = &types.AttributeValueMemberNULL{Value: true}

// attrOptN is n, or NULL for nil ("set to none", unlike an absent
// attribute, which means "not set yet").
func attrOptN(n *int64) types.AttributeValue {
	if n == nil {
		return attrNull
	}
	return attrN(*n)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: attrS(pk), AttrSK: attrS(sk)}
}

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// num reads an N attribute: ok is false when it is absent or NULL.
func num(item map[string]types.AttributeValue, name string) (int64, bool, error) {
	switch v := item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return 0, false, nil
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("attribute %s: %w", name, err)
		}
		return n, true, nil
	default:
		return 0, false, fmt.Errorf("attribute %s: unexpected type %T", name, v)
	}
}

// optNum reads an N-or-NULL attribute as a pointer (nil: absent or NULL).
func optNum(item map[string]types.AttributeValue, name string) (*int64, error) {
	n, ok, err := num(item, name)
	if err != nil || !ok {
		return nil, err
	}
	return &n, nil
}

// formatFloat writes a score as a DynamoDB number (which cannot hold
// magnitudes under 1e-130: those are 0).
func formatFloat(f float64) string {
	if math.Abs(f) < 1e-100 {
		f = 0
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeLayout, s) }

// markerName is the account attribute that marks a request's cost as
// counted: fixed length, whatever the request id is made of.
func markerName(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return attrMarker + hex.EncodeToString(sum[:])[:markerHexLen]
}

// markers returns the markers of an account item: attribute name -> request
// id.
func markers(item map[string]types.AttributeValue) map[string]string {
	out := map[string]string{}
	for name := range item {
		if strings.HasPrefix(name, attrMarker) {
			out[name] = str(item, name)
		}
	}
	return out
}

// entryItem is the item of an entry: pk req#<id>, sk ledger.
func entryItem(e billing.Entry, state string) map[string]types.AttributeValue {
	item := key(PKRequest+e.RequestID, SKEntry)
	putEntryFields(item, e)
	item[attrState] = attrS(state)
	return item
}

// indexItem is the entry again, by project and time: pk
// ledger#<shard>#<project> (the request's spend shard),
// sk <at>#<id>.
func indexItem(e billing.Entry, shard int) map[string]types.AttributeValue {
	item := key(fmt.Sprintf("%s%02d#%s", PKLedger, shard, e.Project), formatTime(e.At)+"#"+e.RequestID)
	putEntryFields(item, e)
	item[attrRequestID] = attrS(e.RequestID)
	return item
}

func putEntryFields(item map[string]types.AttributeValue, e billing.Entry) {
	item[attrProject] = attrS(e.Project)
	item[attrKeyID] = attrS(e.KeyID)
	// Empty strings are left out: they read back as "".
	if e.Model != "" {
		item[attrModel] = attrS(e.Model)
	}
	if e.Provider != "" {
		item[attrProvider] = attrS(e.Provider)
	}
	item[attrPrompt] = attrN(int64(e.PromptTokens))
	item[attrComplete] = attrN(int64(e.CompletionTokens))
	item[attrCost] = attrN(e.CostNanos)
	item[attrAt] = attrS(formatTime(e.At))
}

// decodeEntry decodes an entry item (requestID given) or an index item
// (requestID "": from the rid attribute).
func decodeEntry(item map[string]types.AttributeValue, requestID string) (billing.Entry, error) {
	if requestID == "" {
		requestID = str(item, attrRequestID)
	}
	e := billing.Entry{
		RequestID: requestID,
		Project:   str(item, attrProject),
		KeyID:     str(item, attrKeyID),
		Model:     str(item, attrModel),
		Provider:  str(item, attrProvider),
	}
	var errs []error
	pt, _, err := num(item, attrPrompt)
	errs = append(errs, err)
	ct, _, err := num(item, attrComplete)
	errs = append(errs, err)
	e.PromptTokens, e.CompletionTokens = int(pt), int(ct)
	e.CostNanos, _, err = num(item, attrCost)
	errs = append(errs, err)
	e.At, err = parseTime(str(item, attrAt))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return billing.Entry{}, fmt.Errorf("dynamoledger: decode entry %s: %w", requestID, err)
	}
	return e, nil
}

// decodeHold decodes the hold fields of an entry item.
func decodeHold(item map[string]types.AttributeValue, requestID string) (billing.Hold, error) {
	h := billing.Hold{RequestID: requestID, Project: str(item, attrProject), KeyID: str(item, attrKeyID), Model: str(item, attrModel)}
	at, err1 := parseTime(str(item, attrAt))
	dl, err2 := parseTime(str(item, attrDeadline))
	if err := errors.Join(err1, err2); err != nil {
		return billing.Hold{}, fmt.Errorf("dynamoledger: decode hold %s: %w", requestID, err)
	}
	h.At, h.Deadline = at, dl
	return h, nil
}

// shardOf spreads request ids over n shards (stable: sha256).
func shardOf(requestID string, n int) int {
	sum := sha256.Sum256([]byte(requestID))
	return int((uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])) % uint32(n))
}
