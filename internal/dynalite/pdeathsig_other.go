//go:build !linux

package dynalite

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
