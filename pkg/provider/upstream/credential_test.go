package upstream

import "testing"

// TestCredential: the value follows the key, made once per key.
func TestCredential(t *testing.T) {
	key := "k1"
	c := NewCredential("Bearer ", func() string { return key })
	first := c.Value()
	if len(first) != 1 || first[0] != "Bearer k1" {
		t.Fatalf("%q", first)
	}
	if again := c.Value(); &again[0] != &first[0] {
		t.Error("the same key made a new value")
	}
	key = "k2"
	if v := c.Value(); len(v) != 1 || v[0] != "Bearer k2" {
		t.Errorf("after rotation: %q", v)
	}
	key = ""
	if v := c.Value(); v != nil {
		t.Errorf("no key: %q", v)
	}
	key = "k3"
	c.Value()
	if n := testing.AllocsPerRun(100, func() { c.Value() }); n != 0 {
		t.Errorf("%v allocations a call with an unchanged key, want 0", n)
	}
}
