package sock

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"golang.org/x/sys/unix"
)

// groupReq is struct group_req (linux/in.h) on a 64-bit kernel: the
// interface index, then a sockaddr_storage aligned to 8 bytes.
type groupReq struct {
	iface uint32
	_     uint32
	group [128]byte
}

// groupSourceReq is struct group_source_req.
type groupSourceReq struct {
	iface  uint32
	_      uint32
	group  [128]byte
	source [128]byte
}

// multicastPreBind sets the options a multicast socket needs before bind
// (SO_REUSEADDR) and the sending options, and returns the interface index
// (0 = the kernel's route choice). It runs in the namespace the socket is
// created in: the interface name is resolved there.
func multicastPreBind(fd, family int, m datapath.Multicast) (int, error) {
	if err := m.Validate(family == unix.AF_INET6); err != nil {
		return 0, err
	}
	ifindex := 0
	if m.Iface != "" {
		ifc, err := net.InterfaceByName(m.Iface)
		if err != nil {
			return 0, fmt.Errorf("sock: multicast interface %q: %w", m.Iface, err)
		}
		if ifc.Flags&net.FlagMulticast == 0 {
			return 0, fmt.Errorf("sock: interface %q has no MULTICAST flag (ip link set %s multicast on)", m.Iface, m.Iface)
		}
		ifindex = ifc.Index
	}
	// Several receivers of one group share a host (and its port): each
	// binds with SO_REUSEADDR, and every one of them gets each multicast
	// datagram. (Unicast to the port reaches only one of them; the
	// protocol sends none to a receiver in a group.)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return 0, fmt.Errorf("sock: SO_REUSEADDR: %w", err)
	}
	loop := 1
	if m.NoLoop {
		loop = 0
	}
	if family == unix.AF_INET6 {
		// IPV6_MULTICAST_ALL arrived in Linux 4.20; an older kernel
		// delivers other sockets' groups on the same port too (harmless
		// for the protocol, which checks every frame), so ENOPROTOOPT is
		// tolerated.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_ALL, 0); err != nil && err != unix.ENOPROTOOPT {
			return 0, fmt.Errorf("sock: IPV6_MULTICAST_ALL: %w", err)
		}
		if ifindex != 0 {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, ifindex); err != nil {
				return 0, fmt.Errorf("sock: IPV6_MULTICAST_IF %s: %w", m.Iface, err)
			}
		}
		if m.TTL != 0 {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, m.TTL); err != nil {
				return 0, fmt.Errorf("sock: IPV6_MULTICAST_HOPS: %w", err)
			}
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, loop); err != nil {
			return 0, fmt.Errorf("sock: IPV6_MULTICAST_LOOP: %w", err)
		}
		return ifindex, nil
	}
	// Linux's default IP_MULTICAST_ALL=1 delivers to a socket bound to
	// INADDR_ANY every group that any socket on the host joined on that
	// port; off, the socket gets only its own groups.
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0); err != nil {
		return 0, fmt.Errorf("sock: IP_MULTICAST_ALL: %w", err)
	}
	if ifindex != 0 {
		if err := unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(ifindex)}); err != nil {
			return 0, fmt.Errorf("sock: IP_MULTICAST_IF %s: %w", m.Iface, err)
		}
	}
	if m.TTL != 0 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, m.TTL); err != nil {
			return 0, fmt.Errorf("sock: IP_MULTICAST_TTL: %w", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, loop); err != nil {
		return 0, fmt.Errorf("sock: IP_MULTICAST_LOOP: %w", err)
	}
	return ifindex, nil
}

// multicastJoin joins every group of m on ifindex, restricted to m's
// sources when there are any (after bind: a join before bind works too,
// but an error is clearer once the address is known to be free).
func multicastJoin(fd, family, ifindex int, m datapath.Multicast) error {
	level := unix.IPPROTO_IP
	if family == unix.AF_INET6 {
		level = unix.IPPROTO_IPV6
	}
	on := m.Iface
	if on == "" {
		on = "the interface of the route to the group"
	}
	for i, g := range append(m.Groups[:len(m.Groups):len(m.Groups)], m.AnySource...) {
		g = g.Unmap()
		if len(m.Sources) == 0 || i >= len(m.Groups) {
			var req groupReq
			req.iface = uint32(ifindex)
			putStorage(&req.group, family, g)
			if err := setsockopt(fd, level, unix.MCAST_JOIN_GROUP, unsafe.Pointer(&req), unsafe.Sizeof(req)); err != nil {
				return joinErr(g, netip.Addr{}, on, err)
			}
			continue
		}
		for _, s := range m.Sources {
			var req groupSourceReq
			req.iface = uint32(ifindex)
			putStorage(&req.group, family, g)
			putStorage(&req.source, family, s.Unmap())
			if err := setsockopt(fd, level, unix.MCAST_JOIN_SOURCE_GROUP, unsafe.Pointer(&req), unsafe.Sizeof(req)); err != nil {
				if err == unix.ENOPROTOOPT || err == unix.EOPNOTSUPP {
					return &batch.UnsupportedError{Feature: "source-specific multicast", Reason: fmt.Sprintf("MCAST_JOIN_SOURCE_GROUP %v from %v", g, s), Err: err}
				}
				return joinErr(g, s, on, err)
			}
		}
	}
	return nil
}

func joinErr(g, src netip.Addr, on string, err error) error {
	what := g.String()
	if src.IsValid() {
		what = fmt.Sprintf("(%v, %v)", src, g)
	}
	hint := ""
	if errors.Is(err, unix.ENODEV) {
		hint = " (no route to the group: name the interface)"
	}
	if errors.Is(err, unix.ENOBUFS) {
		hint = " (net.ipv4.igmp_max_memberships / igmp_max_msf reached)"
	}
	return fmt.Errorf("sock: join multicast group %s on %s%s: %w", what, on, hint, err)
}

func putStorage(dst *[128]byte, family int, a netip.Addr) {
	var sa unix.RawSockaddrInet6
	n := batch.PutSockaddr(&sa, family, netip.AddrPortFrom(a, 0))
	copy(dst[:], unsafe.Slice((*byte)(unsafe.Pointer(&sa)), n))
}

func setsockopt(fd, level, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}
