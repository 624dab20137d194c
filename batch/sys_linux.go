package batch

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Syscalls is the one seam through which every datapath makes its raw
// socket system calls. Each function returns the kernel's result and the
// raw errno (0 on success): the hot path compares errnos and never builds
// an error value for EAGAIN.
//
// The defaults use RawSyscall6: every socket this module drives is
// non-blocking (and the calls pass MSG_DONTWAIT semantics through
// O_NONBLOCK), so a call never sleeps in the kernel and skipping the
// scheduler's entersyscall/exitsyscall makes an empty poll cheaper
// (docs/datapath.md). RawSyscall must never be
// used for a call that can block.
type Syscalls struct {
	Sendmmsg func(fd int, hs []unix.Mmsghdr, flags int) (int, unix.Errno)
	Recvmmsg func(fd int, hs []unix.Mmsghdr, flags int) (int, unix.Errno)
	// Sendto sends p to sa (salen bytes); sa nil means the connected peer.
	Sendto func(fd int, p []byte, flags int, sa *unix.RawSockaddrInet6, salen uint32) (int, unix.Errno)
	// Recvfrom receives into p; the source is written to sa (when not nil)
	// and its length to *salen (in/out).
	Recvfrom func(fd int, p []byte, flags int, sa *unix.RawSockaddrInet6, salen *uint32) (int, unix.Errno)
}

// DefaultSyscalls returns the real system calls.
func DefaultSyscalls() Syscalls {
	return Syscalls{Sendmmsg: sendmmsg, Recvmmsg: recvmmsg, Sendto: sendto, Recvfrom: recvfrom}
}

// Sys is the seam in use. Tests replace fields to inject EAGAIN, ENOBUFS,
// EIO or short sends, and restore it afterwards; change it only while no
// datapath is running.
var Sys = DefaultSyscalls()

func sendmmsg(fd int, hs []unix.Mmsghdr, flags int) (int, unix.Errno) {
	if len(hs) == 0 {
		return 0, 0
	}
	r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hs[0])), uintptr(len(hs)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

func recvmmsg(fd int, hs []unix.Mmsghdr, flags int) (int, unix.Errno) {
	if len(hs) == 0 {
		return 0, 0
	}
	r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hs[0])), uintptr(len(hs)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

func sendto(fd int, p []byte, flags int, sa *unix.RawSockaddrInet6, salen uint32) (int, unix.Errno) {
	var b unsafe.Pointer
	if len(p) > 0 {
		b = unsafe.Pointer(&p[0])
	}
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(b), uintptr(len(p)), uintptr(flags), uintptr(unsafe.Pointer(sa)), uintptr(salen))
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

func recvfrom(fd int, p []byte, flags int, sa *unix.RawSockaddrInet6, salen *uint32) (int, unix.Errno) {
	var b unsafe.Pointer
	if len(p) > 0 {
		b = unsafe.Pointer(&p[0])
	}
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(b), uintptr(len(p)), uintptr(flags), uintptr(unsafe.Pointer(sa)), uintptr(unsafe.Pointer(salen)))
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}
