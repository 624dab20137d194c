package batch

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PutSockaddr encodes ap into sa for a socket of the given family
// (unix.AF_INET or unix.AF_INET6) and returns the length to pass to the
// kernel, or 0 when ap cannot be reached from that family (an IPv6
// address on an IPv4 socket). IPv4 addresses on an IPv6 socket are
// written v4-mapped. It does not allocate.
func PutSockaddr(sa *unix.RawSockaddrInet6, family int, ap netip.AddrPort) uint32 {
	a := ap.Addr()
	port := ap.Port()
	if family == unix.AF_INET {
		if !a.Is4() && !a.Is4In6() {
			return 0
		}
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		s4.Family = unix.AF_INET
		p := (*[2]byte)(unsafe.Pointer(&s4.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		s4.Addr = a.Unmap().As4()
		s4.Zero = [8]uint8{}
		return unix.SizeofSockaddrInet4
	}
	sa.Family = unix.AF_INET6
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
	sa.Flowinfo = 0
	sa.Addr = a.As16()
	sa.Scope_id = 0
	return unix.SizeofSockaddrInet6
}

// ParseSockaddr decodes a socket address written by the kernel. IPv4-mapped
// IPv6 addresses are unmapped, so a peer compares equal to its configured
// IPv4 address. Unknown families give the zero AddrPort. No allocation.
func ParseSockaddr(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		p := (*[2]byte)(unsafe.Pointer(&s4.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), uint16(p[0])<<8|uint16(p[1]))
	case unix.AF_INET6:
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(p[0])<<8|uint16(p[1]))
	}
	return netip.AddrPort{}
}
