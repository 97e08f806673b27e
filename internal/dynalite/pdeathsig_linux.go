package dynalite

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill dynalite when the test binary dies
// without running its cleanups (a panic on timeout, a SIGKILL).
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
