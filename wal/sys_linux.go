//go:build linux

package wal

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openDirect opens path with O_DIRECT. Callers fall back to buffered I/O
// when it fails (tmpfs before 6.6 answers EINVAL at open).
func openDirect(path string, flag int) (int, error) {
	return unix.Open(path, flag|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
}

// errDioUnknown: the kernel did not answer STATX_DIOALIGN (before 6.1).
var errDioUnknown = errors.New("statx STATX_DIOALIGN not reported")

// dioAlign asks the kernel (statx STATX_DIOALIGN, Linux 6.1+) for the
// O_DIRECT alignment of fd's file: memory and file-offset alignment in
// bytes. ErrNotSupported: the filesystem says it has no O_DIRECT for this
// file (offset alignment 0); errDioUnknown: the kernel did not say.
func dioAlign(fd int) (mem, off uint32, err error) {
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &sx); err != nil {
		return 0, 0, err
	}
	if sx.Mask&unix.STATX_DIOALIGN == 0 {
		return 0, 0, errDioUnknown
	}
	if sx.Dio_offset_align == 0 {
		return 0, 0, ErrNotSupported
	}
	return sx.Dio_mem_align, sx.Dio_offset_align, nil
}

// preallocate reserves size bytes for fd (fallocate mode 0: the file size
// becomes size, the new range reads as zeros). Where fallocate is not
// supported it extends the file with ftruncate (sparse, no reservation).
func preallocate(fd int, size int64) error {
	err := unix.Fallocate(fd, 0, 0, size)
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		return unix.Ftruncate(fd, size)
	}
	return err
}

func datasync(fd int) error { return unix.Fdatasync(fd) }

// isDirectEINVAL reports whether err is the kernel refusing an O_DIRECT
// transfer (alignment or filesystem), which makes the writer fall back to
// buffered I/O.
func isDirectEINVAL(err error) bool { return err == unix.EINVAL }
