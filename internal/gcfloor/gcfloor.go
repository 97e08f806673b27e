// Package gcfloor keeps the garbage collector's heap goal from falling
// below a floor. With GOGC=100 the runtime collects once the heap has grown
// by as much as was live after the last collection; the gateway's live
// heap is a few MiB, so a process that reads 1 MB request bodies would
// collect every two or three requests, each collection taking a CPU for
// milliseconds and handing freed pages back to the kernel only to fault
// them in again. Start raises GOGC while the live heap is small, so that
// the goal stays at the floor, and gives the default back once the live
// heap (with the stacks and globals to scan) reaches half the floor, where
// the default's goal is the floor or more: from there the runtime behaves
// as it would without it.
// A memory limit (GOMEMLIMIT) still bounds the heap, whatever GOGC says.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Floor is the heap goal the gateway keeps at least: a dozen or more 1 MB
// bodies between collections, while the closed loop of the load benchmark
// (many small requests) stays under its 50 MiB of peak RSS (48 MiB with
// this floor, 57 MiB with 32 MiB, 91 MiB with 64 MiB).
const Floor = 24 << 20

// defaultPercent is GOGC's default, and the least Start ever sets.
const defaultPercent = 100

// Start keeps the heap goal at floor bytes at least, from now on, unless
// the GOGC environment variable is set (the operator's choice stands).
// stop ends it and gives GOGC its default back.
func Start(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	t := &tuner{floor: floor, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
	t.tune()
	t.arm()
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(defaultPercent)
	}
}

type tuner struct {
	floor   uint64
	sample  []metrics.Sample
	percent int // the GOGC last set; only the cleanup goroutine changes it
	stopped atomic.Bool
}

// sentinel is an object whose only use is to become garbage: its cleanup
// runs after the collection that found it unreachable.
type sentinel struct{ _ [64]byte }

// arm makes the next collection call tune (and arm again).
func (t *tuner) arm() {
	runtime.AddCleanup(new(sentinel), func(t *tuner) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// tune sets GOGC so that the next goal is the floor, or the default's when
// that is more.
func (t *tuner) tune() {
	metrics.Read(t.sample)
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	p := Percent(t.floor, v[0], v[1]+v[2])
	// Small changes are not worth a call: within an eighth either way.
	if t.percent != 0 && p > t.percent*7/8 && p < t.percent*9/8 {
		return
	}
	t.percent = p
	if !t.stopped.Load() {
		debug.SetGCPercent(p)
	}
}

// Percent is the GOGC that makes the goal floor after a collection that
// left live heap bytes, with roots bytes of stacks and globals to scan,
// and never less than the default. The runtime's goal is live +
// (live+roots)*GOGC/100, but at least 4 MiB*GOGC/100.
func Percent(floor, live, roots uint64) int {
	const heapMinimum = 4 << 20
	base := live + roots
	if live+base >= floor {
		return defaultPercent
	}
	p := floor * 100 / heapMinimum
	if base > 0 {
		p = min(p, (floor-live)*100/base)
	}
	return max(defaultPercent, int(p))
}
