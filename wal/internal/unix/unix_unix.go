//go:build !windows

package unix

import "golang.org/x/sys/unix"

// Open flags, mmap and flock arguments, and errnos, as x/sys/unix has them.
const (
	O_RDONLY    = unix.O_RDONLY
	O_RDWR      = unix.O_RDWR
	O_CREAT     = unix.O_CREAT
	O_TRUNC     = unix.O_TRUNC
	O_EXCL      = unix.O_EXCL
	O_CLOEXEC   = unix.O_CLOEXEC
	PROT_READ   = unix.PROT_READ
	MAP_SHARED  = unix.MAP_SHARED
	LOCK_EX     = unix.LOCK_EX
	LOCK_NB     = unix.LOCK_NB
	EINTR       = unix.EINTR
	EINVAL      = unix.EINVAL
	EIO         = unix.EIO
	EWOULDBLOCK = unix.EWOULDBLOCK
)

// Stat_t is the result of Fstat.
type Stat_t = unix.Stat_t

func Open(path string, mode int, perm uint32) (int, error) { return unix.Open(path, mode, perm) }
func Close(fd int) error                                   { return unix.Close(fd) }
func Pread(fd int, p []byte, off int64) (int, error)       { return unix.Pread(fd, p, off) }
func Pwrite(fd int, p []byte, off int64) (int, error)      { return unix.Pwrite(fd, p, off) }
func Ftruncate(fd int, size int64) error                   { return unix.Ftruncate(fd, size) }
func Fsync(fd int) error                                   { return unix.Fsync(fd) }
func Fstat(fd int, st *Stat_t) error                       { return unix.Fstat(fd, st) }
func Flock(fd int, how int) error                          { return unix.Flock(fd, how) }
func Munmap(b []byte) error                                { return unix.Munmap(b) }

func Mmap(fd int, off int64, length int, prot int, flags int) ([]byte, error) {
	return unix.Mmap(fd, off, length, prot, flags)
}
