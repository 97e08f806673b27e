package gateway

import "testing"

// TestTryAdmit: the slots are the generations' own, taken without waiting
// and given back once.
func TestTryAdmit(t *testing.T) {
	svc := New(Config{MaxInFlight: 2}, nil, nil, Accounts{}, nil, nil, nil)
	r1, ok1 := svc.TryAdmit()
	r2, ok2 := svc.TryAdmit()
	if _, ok := svc.TryAdmit(); !ok1 || !ok2 || ok {
		t.Fatalf("three tries with two slots: %v %v %v", ok1, ok2, ok)
	}
	if _, ok := svc.admit(); ok {
		t.Errorf("a generation was admitted with every slot taken")
	}
	r1()
	r1() // a second release gives nothing back
	if _, ok := svc.TryAdmit(); !ok {
		t.Errorf("no slot after a release")
	}
	if _, ok := svc.TryAdmit(); ok {
		t.Errorf("a released slot was given back twice")
	}
	r2()
}
