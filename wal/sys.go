package wal

import (
	"unsafe"

	"github.com/walcast/walcast/wal/internal/unix"
)

// sysOps is the syscall seam of the writer: tests replace defaultSys
// before Open to assert alignment or to inject ENOSPC/EIO.
type sysOps struct {
	pwrite   func(fd int, p []byte, off int64) (int, error)
	pread    func(fd int, p []byte, off int64) (int, error)
	datasync func(fd int) error
	prealloc func(fd int, size int64) error
}

var defaultSys = sysOps{
	pwrite:   unix.Pwrite,
	pread:    unix.Pread,
	datasync: datasync,
	prealloc: preallocate,
}

// pageSize is the alignment used for O_DIRECT when the filesystem asks for
// less (and when it reports nothing): every filesystem accepts a 4 KiB
// aligned transfer.
const pageSize = 4096

// alignedBuf returns a zeroed n-byte slice whose first byte is aligned to
// align (a power of two). It is GC-managed memory, over-allocated by align.
func alignedBuf(n, align int) []byte {
	b := make([]byte, n+align)
	a := int(uintptr(unsafe.Pointer(&b[0])) & uintptr(align-1))
	skip := 0
	if a != 0 {
		skip = align - a
	}
	return b[skip : skip+n : skip+n]
}

func isAligned(b []byte, align int) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))&uintptr(align-1) == 0
}

func alignDown(x, a int64) int64 { return x &^ (a - 1) }
func alignUp(x, a int64) int64   { return (x + a - 1) &^ (a - 1) }

// preadFull reads p at off with one pread (retried on EINTR). A regular
// file returns fewer bytes only at its end, and an O_DIRECT read must not
// be continued at the unaligned offset a short read leaves, so a short
// count is returned as is, not continued.
func preadFull(pread func(int, []byte, int64) (int, error), fd int, p []byte, off int64) (int, error) {
	for {
		m, err := pread(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return m, nil
	}
}

func pwriteFull(pwrite func(int, []byte, int64) (int, error), fd int, p []byte, off int64) error {
	for len(p) > 0 {
		m, err := pwrite(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if m == 0 {
			return unix.EIO
		}
		p = p[m:]
		off += int64(m)
	}
	return nil
}
