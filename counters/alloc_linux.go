package counters

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate sets f's size and allocates its pages. A file system without
// fallocate (EOPNOTSUPP) keeps the file sparse: the mirror survives a
// fault anyway (see File.mirror).
func allocate(f *os.File, size int) error {
	if err := f.Truncate(int64(size)); err != nil {
		return err
	}
	err := unix.Fallocate(int(f.Fd()), 0, 0, int64(size))
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		return nil
	}
	return err
}
