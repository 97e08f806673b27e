package jsonscan

import "testing"

func TestSkipSpace(t *testing.T) {
	for _, c := range []struct {
		in   string
		from int
		want int
	}{
		{"", 0, 0},
		{"x", 0, 0},
		{" \t\n\rx", 0, 4},
		{"  ", 0, 2},
		{"a b", 1, 2},
		{"a b", 3, 3},
		{"\f\v x", 0, 0},  // not JSON whitespace
		{"\u00a0x", 0, 0}, // nor is a no-break space
	} {
		if got := SkipSpace([]byte(c.in), c.from); got != c.want {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", c.in, c.from, got, c.want)
		}
	}
}
