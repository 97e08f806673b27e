package rie

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill the emulator when this process dies
// without closing it (a test binary's panic on timeout, a SIGKILL).
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
