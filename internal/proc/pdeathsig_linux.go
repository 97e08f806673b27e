package proc

import (
	"os/exec"
	"syscall"
)

// SetPdeathsig makes the kernel kill cmd's process (SIGKILL) when the thread
// that started it ends, which for a Go program is when the program dies: the
// runtime ends a thread only when a goroutine locked to it returns, so a
// caller that starts children from a goroutine locked to its thread
// (runtime.LockOSThread) keeps that goroutine for as long as they run.
func SetPdeathsig(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
