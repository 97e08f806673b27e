//go:build !linux

package proc

import "os/exec"

// SetPdeathsig does nothing here: only Linux kills a child when its parent
// dies; elsewhere a child left behind by a crash must be stopped by hand.
func SetPdeathsig(*exec.Cmd) {}
