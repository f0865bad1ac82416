package soak_test

import (
	"os/exec"
	"syscall"
)

// setPdeathsig has the kernel kill the replica process when the test
// process dies.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
