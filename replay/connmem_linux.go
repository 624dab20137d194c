package replay

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// mapMem maps n bytes of anonymous memory: pages cost nothing until they
// are touched, and unmapMem returns them to the kernel at once, whatever
// the garbage collector is doing (buffers on the Go heap stayed held
// long after their slow readers had closed: docs/replay.md).
func mapMem(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("replay: connection buffers (%d bytes): %w", n, err)
	}
	return b, nil
}

func unmapMem(b []byte) { _ = unix.Munmap(b) }
