package systemtest_test

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

func sha256Key(k string) [32]byte { return sha256.Sum256([]byte(k)) }

// exactlyOnce is the sequential specification of one Idempotency-Key: the
// first call produces an answer (not replayed); every later call returns
// that same answer, replayed.
var exactlyOnce = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, _, output any) (bool, any) {
		out := output.(keyedOutput)
		if state.(string) == "" {
			return !out.replayed, out.requestID
		}
		return out.replayed && out.requestID == state.(string), state
	},
	DescribeOperation: func(_, output any) string {
		out := output.(keyedOutput)
		return fmt.Sprintf("call() -> %s replayed=%v", out.requestID, out.replayed)
	},
}

type keyedOutput struct {
	requestID string
	replayed  bool
}

// linearizable checks a history of calls with one key against exactlyOnce
// with porcupine.
func linearizable(ops []op) error {
	if len(ops) == 0 {
		return nil
	}
	base := ops[0].begin
	for _, o := range ops {
		if o.begin.Before(base) {
			base = o.begin
		}
	}
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		hist = append(hist, porcupine.Operation{
			ClientId: o.client,
			Call:     int64(o.begin.Sub(base)),
			Return:   int64(o.end.Sub(base)),
			Output:   keyedOutput{requestID: o.a.reqID, replayed: o.a.replayed == "true"},
		})
	}
	if res := porcupine.CheckOperationsTimeout(exactlyOnce, hist, 10*time.Second); res != porcupine.Ok {
		return fmt.Errorf("the history of %d keyed calls is not linearizable as exactly-once: %s", len(ops), res)
	}
	return nil
}
