package main

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill the child if the test process dies
// first (a killed `go test` leaves no cast processes behind).
func dieWithTest(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
