package gateway

import (
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// TestTryAdmit: the slots are the generations' own, taken without waiting
// and given back once.
func TestTryAdmit(t *testing.T) {
	svc := New(Config{MaxInFlight: 2}, nil, nil, Accounts{}, nil, nil, nil)
	r1, ok1 := svc.TryAdmit()
	r2, ok2 := svc.TryAdmit()
	if _, ok := svc.TryAdmit(); !ok1 || !ok2 || ok {
		t.Fatalf("three tries with two slots: %v %v %v", ok1, ok2, ok)
	}
	if _, err := svc.admit(nil); err == nil {
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

// A project's own bound: its slots are taken with the instance's and given
// back with them, and the instance's slot is not kept when the project's
// bound refuses.
func TestAdmitProject(t *testing.T) {
	svc := New(Config{MaxInFlight: 3}, nil, nil, Accounts{}, nil, nil, nil)
	p := &catalog.Project{ID: "p", MaxInFlight: 1}
	a, err := svc.admit(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.admit(p); err == nil || !strings.Contains(err.Error(), "max_in_flight") {
		t.Fatalf("a second request of the project: %v, want its capacity error", err)
	}
	other, err := svc.admit(&catalog.Project{ID: "q"})
	if err != nil {
		t.Fatalf("another project: %v", err)
	}
	if len(svc.sem) != 2 {
		t.Errorf("%d instance slots held, want 2 (the refusal kept none)", len(svc.sem))
	}
	a.release()
	if _, err := svc.admit(p); err != nil {
		t.Errorf("after the release: %v", err)
	}
	other.release()
}
