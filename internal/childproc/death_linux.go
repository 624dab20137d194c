package childproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks the kernel to kill the child if the test process
// dies first (a killed `go test` leaves no children behind). Pdeathsig
// follows the thread that started the child; test goroutines are not
// locked to threads, so that thread lives as long as the process.
func dieWithParent(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
