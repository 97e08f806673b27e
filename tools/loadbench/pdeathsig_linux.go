package main

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill a child (the mock upstream, the
// gateway) when this process dies without stopping it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
