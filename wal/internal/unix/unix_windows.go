package unix

import (
	"errors"
	"syscall"

	"golang.org/x/sys/windows"
)

// Open flags as the syscall package's Open takes them; the mmap and flock
// arguments are accepted and mean what wal asks for (a read-only copy, an
// exclusive lock that fails at once when held).
const (
	O_RDONLY    = syscall.O_RDONLY
	O_RDWR      = syscall.O_RDWR
	O_CREAT     = syscall.O_CREAT
	O_TRUNC     = syscall.O_TRUNC
	O_EXCL      = syscall.O_EXCL
	O_CLOEXEC   = syscall.O_CLOEXEC
	PROT_READ   = 0x1
	MAP_SHARED  = 0x1
	LOCK_EX     = 0x2
	LOCK_NB     = 0x4
	EINTR       = syscall.EINTR
	EINVAL      = syscall.EINVAL
	EIO         = syscall.EIO
	EWOULDBLOCK = syscall.EWOULDBLOCK
)

// Stat_t is the result of Fstat: the file's size in bytes.
type Stat_t struct{ Size int64 }

func h(fd int) syscall.Handle { return syscall.Handle(fd) }

// Open opens path; the handle is returned as an int, as fds are.
func Open(path string, mode int, perm uint32) (int, error) {
	fd, err := syscall.Open(path, mode, perm)
	return int(fd), err
}

func Close(fd int) error { return syscall.CloseHandle(h(fd)) }

// Pread reads at off without moving the file pointer's meaning for
// others: a synchronous ReadFile with the offset in an OVERLAPPED.
func Pread(fd int, p []byte, off int64) (int, error) {
	var n uint32
	ov := syscall.Overlapped{Offset: uint32(off), OffsetHigh: uint32(off >> 32)}
	err := syscall.ReadFile(h(fd), p, &n, &ov)
	if errors.Is(err, syscall.ERROR_HANDLE_EOF) {
		err = nil
	}
	return int(n), err
}

// Pwrite writes at off (WriteFile with the offset in an OVERLAPPED).
func Pwrite(fd int, p []byte, off int64) (int, error) {
	var n uint32
	ov := syscall.Overlapped{Offset: uint32(off), OffsetHigh: uint32(off >> 32)}
	err := syscall.WriteFile(h(fd), p, &n, &ov)
	return int(n), err
}

func Ftruncate(fd int, size int64) error { return syscall.Ftruncate(h(fd), size) }

// Fsync flushes the file's buffers to the device (FlushFileBuffers).
func Fsync(fd int) error { return syscall.Fsync(h(fd)) }

func Fstat(fd int, st *Stat_t) error {
	var fi syscall.ByHandleFileInformation
	if err := syscall.GetFileInformationByHandle(h(fd), &fi); err != nil {
		return err
	}
	st.Size = int64(fi.FileSizeHigh)<<32 | int64(fi.FileSizeLow)
	return nil
}

// Flock takes an exclusive lock on the file's first byte (LockFileEx);
// with LOCK_NB a lock held elsewhere fails at once with EWOULDBLOCK.
func Flock(fd int, how int) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if how&LOCK_NB != 0 {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	var ov windows.Overlapped
	err := windows.LockFileEx(windows.Handle(fd), flags, 0, 1, 0, &ov)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return EWOULDBLOCK
	}
	return err
}

// Mmap reads length bytes at off into memory: wal maps only sealed index
// files, which never change, so a copy is what a read-only mapping gives.
func Mmap(fd int, off int64, length int, prot int, flags int) ([]byte, error) {
	b := make([]byte, length)
	for n := 0; n < length; {
		k, err := Pread(fd, b[n:], off+int64(n))
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, EIO
		}
		n += k
	}
	return b, nil
}

// Munmap releases what Mmap returned (garbage-collected memory here).
func Munmap(b []byte) error { return nil }
