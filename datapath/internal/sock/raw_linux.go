package sock

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

type batchSockaddr = unix.RawSockaddrInet6

// bind, connect and getsockname on a raw sockaddr: unix.Bind wants a
// unix.Sockaddr, and these run once per socket, so the plain Syscall is
// fine here.
func bindRaw(fd int, sa *unix.RawSockaddrInet6, n uint32) error {
	_, _, e := unix.Syscall(unix.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(sa)), uintptr(n))
	if e != 0 {
		return e
	}
	return nil
}

func connectRaw(fd int, sa *unix.RawSockaddrInet6, n uint32) error {
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(sa)), uintptr(n))
	if e != 0 {
		return e
	}
	return nil
}

func getsocknameRaw(fd int, sa *unix.RawSockaddrInet6, n *uint32) error {
	_, _, e := unix.Syscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(sa)), uintptr(unsafe.Pointer(n)))
	if e != 0 {
		return e
	}
	return nil
}
