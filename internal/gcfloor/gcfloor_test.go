package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		floor, live, roots uint64
		want               int
	}{
		{64 << 20, 4 << 20, 0, 1500},
		{64 << 20, 3 << 20, 1 << 20, 1525},
		{64 << 20, 1 << 20, 0, 1600}, // the runtime's minimum goal, 4 MiB*GOGC/100, reaches the floor first
		{64 << 20, 0, 0, 1600},
		{64 << 20, 32 << 20, 0, 100},
		{64 << 20, 200 << 20, 0, 100},
		{64 << 20, 30 << 20, 0, 113},
	} {
		if got := Percent(tc.floor, tc.live, tc.roots); got != tc.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", tc.floor, tc.live, tc.roots, got, tc.want)
		}
	}
}

// heapGoal is the runtime's current heap goal.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// eventually polls cond after a collection until it holds, for at most
// 10 s: the tuner runs on the cleanup goroutine, after the collection.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never; heap goal %d MiB", what, heapGoal()>>20)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStart: with a small live heap the goal is the floor; a live heap
// beyond half the floor gets the default; stop gives the default back.
func TestStart(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Setenv("GOGC", "")
		os.Unsetenv("GOGC")
	}
	const floor = 256 << 20
	stop := Start(floor)
	defer stop()
	eventually(t, "the goal reaches the floor", func() bool {
		g := heapGoal()
		return g >= floor*7/8 && g <= floor*9/8
	})
	live := make([][]byte, 0, 200)
	for range 200 { // 200 MiB live: more than half the floor
		live = append(live, make([]byte, 1<<20))
	}
	eventually(t, "the default back above half the floor", func() bool {
		old := debug.SetGCPercent(-1)
		debug.SetGCPercent(old)
		return old == defaultPercent
	})
	runtime.KeepAlive(live)
	stop()
	if old := debug.SetGCPercent(defaultPercent); old != defaultPercent {
		t.Errorf("after stop GOGC = %d", old)
	}
}

// TestStartRespectsGOGC: an operator's GOGC stands.
func TestStartRespectsGOGC(t *testing.T) {
	t.Setenv("GOGC", "50")
	old := debug.SetGCPercent(77)
	defer debug.SetGCPercent(old)
	stop := Start(1 << 30)
	defer stop()
	runtime.GC()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("GOGC changed to %d with GOGC set", got)
	}
}
