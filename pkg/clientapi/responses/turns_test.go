package responses

import (
	"fmt"
	"slices"
	"testing"
)

// The segments of a conversation (turns.go): from any turn, following the
// Before lists reaches every turn before it exactly once, in
// 1 + ceil((n-1)/16) rounds of reads, and no turn holds more than 16 ids.
func TestSegmentBefore(t *testing.T) {
	const turns = 300
	ids := make([]string, turns)
	for i := range ids {
		ids[i] = fmt.Sprintf("resp_%d", i+1)
	}
	before := make([][]string, turns+1) // by depth
	for d := 1; d <= turns; d++ {
		before[d] = segmentBefore(ids[:d-1])
		if len(before[d]) > turnSegment {
			t.Fatalf("turn %d holds %d ids", d, len(before[d]))
		}
	}
	depth := func(id string) int { return slices.Index(ids, id) + 1 }
	for n := 1; n <= turns; n++ {
		read := []int{n}
		rounds := 1
		for cur := n; len(before[cur]) > 0; rounds++ {
			b := before[cur]
			if b[len(b)-1] != ids[cur-2] && cur == n {
				t.Fatalf("turn %d: its last id %s is not the turn it continued", n, b[len(b)-1])
			}
			for _, id := range b {
				read = append(read, depth(id))
			}
			cur = depth(b[0])
		}
		slices.Sort(read)
		want := make([]int, n)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(read, want) {
			t.Fatalf("from turn %d the reads reach %v", n, read)
		}
		if wantRounds := 1 + (n-1+turnSegment-1)/turnSegment; rounds != wantRounds {
			t.Errorf("from turn %d: %d rounds of reads, want %d", n, rounds, wantRounds)
		}
	}
}
