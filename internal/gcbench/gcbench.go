// Package gcbench measures what a data structure costs the garbage
// collector, for benchmarks of the in-memory stores.
package gcbench

import (
	"runtime"
	"testing"
)

// Collect runs one full collection a loop of b while keep stays alive, and
// reports the live heap after the last (heap-MiB). ns/op is the time of one
// collection, which grows with what the collector has to mark: data kept
// without pointers costs it little, however much of it there is.
func Collect(b *testing.B, keep any) {
	b.Helper()
	runtime.GC()
	for b.Loop() {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	runtime.KeepAlive(keep)
}
