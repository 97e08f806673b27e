//go:build !linux

package rie

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
