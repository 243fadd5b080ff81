package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill a node if the test binary dies (a
// panic, a -timeout), so no broker outlives its test.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
