package billing

import (
	"errors"
	"fmt"
)

// The errors of a Ledger and of a KeyStore. Callers test them with
// errors.Is: a store wraps them with the cause.
var (
	// ErrLedgerCollision: a Bill with a RequestID the ledger already holds
	// with a different payload. The first entry stays; nothing is billed.
	ErrLedgerCollision = errors.New("billing: ledger collision: the request id is already billed with a different payload")
	// ErrInsufficientBalance: the project's prepaid balance is spent (402
	// insufficient_balance).
	ErrInsufficientBalance = errors.New("billing: insufficient balance")
	// ErrKeyLimitReached: the key's spend limit is reached (402
	// key_limit_reached).
	ErrKeyLimitReached = errors.New("billing: key limit reached")
	// ErrNotFound: no ledger entry with that request id.
	ErrNotFound = errors.New("billing: not found")
	// ErrInvalid: a malformed argument (an empty id, a negative cost, a
	// field over its bound); the message names it.
	ErrInvalid = errors.New("billing: invalid argument")
	// ErrUnavailable wraps every failure to reach the store (network,
	// throttling after the SDK's retries, a missing table, the caller's
	// deadline), with the cause.
	ErrUnavailable = errors.New("billing store unavailable")

	// ErrUnknownKey: no key with that hash (401 invalid_api_key).
	ErrUnknownKey = errors.New("billing: unknown api key")
	// ErrKeyRevoked: the key was revoked (401 invalid_api_key); Lookup
	// returns its record with it.
	ErrKeyRevoked = errors.New("billing: api key revoked")
	// ErrUnknownProject: Issue for a project that was never created.
	ErrUnknownProject = errors.New("billing: unknown project")
	// ErrProjectExists: CreateProject of a project that exists.
	ErrProjectExists = errors.New("billing: project exists")
	// ErrKeyConflict: ImportKey of a key hash that belongs to another
	// project or key id.
	ErrKeyConflict = errors.New("billing: api key already belongs to another project or key id")
)

func invalid(msg string) error { return fmt.Errorf("%w: %s", ErrInvalid, msg) }
