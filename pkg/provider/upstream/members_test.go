package upstream

import "testing"

func TestMembers(t *testing.T) {
	o, err := ParseObject([]byte(` {"a":"x","b":1,"c":null,"A":"y"} `))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a": "x", "A": "y"} {
		if v, ok := o.Str(k); !ok || v != want {
			t.Errorf("Str(%q) = %q, %v", k, v, ok)
		}
	}
	for _, k := range []string{"b", "c", "missing"} {
		if _, ok := o.Str(k); ok {
			t.Errorf("Str(%q): a string", k)
		}
	}
	for _, bad := range []string{"", "[]", `"s"`, "{"} {
		if _, err := ParseObject([]byte(bad)); err == nil {
			t.Errorf("ParseObject(%q): no error", bad)
		}
	}
	if l, ok := List([]byte(` [1, "a"] `)); !ok || len(l) != 2 {
		t.Errorf("List: %q %v", l, ok)
	}
	for _, none := range []string{"", " null "} {
		if l, ok := List([]byte(none)); !ok || l != nil {
			t.Errorf("List(%q): %q %v", none, l, ok)
		}
	}
	if _, ok := List([]byte(`{"a":1}`)); ok {
		t.Error("List of an object")
	}
}
