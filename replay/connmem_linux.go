package replay

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// mapMem maps n bytes of anonymous memory: pages cost nothing until they
// are touched, and unmapMem returns them to the kernel at once, whatever
// the garbage collector is doing (1 100 slow readers held 996 MB of Go
// heap after they had all closed, issue 16 item 10).
func mapMem(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("replay: connection buffers (%d bytes): %w", n, err)
	}
	return b, nil
}

func unmapMem(b []byte) { _ = unix.Munmap(b) }
