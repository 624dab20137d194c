package datapath

import (
	"errors"
	"fmt"
	"net/netip"
)

// Multicast configures a socket datapath (udp, mmsg) for one-to-many
// streams: sending to a group and joining groups to receive. The zero
// value leaves every multicast option at the kernel's default.
//
// A socket that joins groups is bound to the unspecified address on the
// stream's port with SO_REUSEADDR, so several receivers (and a sender
// listening for their control frames) share one host, and with
// IP_MULTICAST_ALL (IPV6_MULTICAST_ALL) off, so it receives only the
// groups it joined itself, not every group some other socket on the host
// joined (Linux's surprising default).
type Multicast struct {
	// Iface names the interface that sends to and joins the groups
	// (IP_MULTICAST_IF / IPV6_MULTICAST_IF and the join's interface). ""
	// lets the kernel choose by route, which fails in a namespace
	// without a route to the group: name the interface there.
	Iface string
	// Groups are joined for receiving (MCAST_JOIN_GROUP), each an IPv4
	// or IPv6 multicast address of the socket's family.
	Groups []netip.Addr
	// Sources, when not empty, restrict every group of Groups to
	// datagrams from these senders (source-specific multicast,
	// MCAST_JOIN_SOURCE_GROUP): the kernel then drops what another host
	// sends to the group, and with IGMPv3/MLDv2 the network may stop
	// forwarding it at all.
	Sources []netip.Addr
	// AnySource are groups joined from every source even when Sources is
	// set: a casting receiver filters its data group by the sender but
	// must hear the control group, where the other receivers send.
	AnySource []netip.Addr
	// TTL is the hop limit of multicast this socket sends
	// (IP_MULTICAST_TTL / IPV6_MULTICAST_HOPS); 0 keeps the kernel's 1
	// (the local link only). At most 255.
	TTL int
	// NoLoop turns IP_MULTICAST_LOOP off: this socket's multicast is not
	// delivered to sockets on the same host (on by default so that a
	// sender and receivers can share a host).
	NoLoop bool
}

// Enabled reports whether any multicast option is set.
func (m Multicast) Enabled() bool {
	return m.Iface != "" || len(m.Groups) > 0 || len(m.AnySource) > 0 || len(m.Sources) > 0 || m.TTL != 0 || m.NoLoop
}

// ErrNotMulticast is wrapped by Validate for a group that is not a
// multicast address.
var ErrNotMulticast = errors.New("datapath: not a multicast address")

// Validate reports a configuration no socket can apply. v6 says whether
// the socket is IPv6 (every group and source must then be IPv6, and IPv4
// otherwise: one socket serves one family).
func (m Multicast) Validate(v6 bool) error {
	fam := "IPv4"
	if v6 {
		fam = "IPv6"
	}
	for _, g := range append(m.Groups[:len(m.Groups):len(m.Groups)], m.AnySource...) {
		g = g.Unmap()
		if !g.IsValid() || !g.IsMulticast() {
			return fmt.Errorf("%w: group %v", ErrNotMulticast, g)
		}
		if g.Is6() != v6 {
			return fmt.Errorf("datapath: group %v is not %s like the socket's address", g, fam)
		}
	}
	if len(m.Sources) > 0 && len(m.Groups) == 0 {
		return errors.New("datapath: multicast Sources without a group to join")
	}
	for _, s := range m.Sources {
		s = s.Unmap()
		if !s.IsValid() || s.IsMulticast() || s.IsUnspecified() {
			return fmt.Errorf("datapath: multicast source %v must be a unicast address", s)
		}
		if s.Is6() != v6 {
			return fmt.Errorf("datapath: multicast source %v is not %s like the socket's address", s, fam)
		}
	}
	if m.TTL < 0 || m.TTL > 255 {
		return fmt.Errorf("datapath: multicast TTL %d outside 0..255", m.TTL)
	}
	if len(m.Iface) > 15 {
		return fmt.Errorf("datapath: interface name %q longer than 15 bytes", m.Iface)
	}
	return nil
}

// ControlGroup is the group a stream's receivers send their control
// frames (NAKs, Status) to when the data goes to group: the next address
// (the last byte plus one, as Aeron pairs its data and control groups),
// same port. Every receiver and the sender join it, so a receiver hears
// the others' NAKs. It returns the zero AddrPort for a non-multicast
// address or when the next address is not multicast.
func ControlGroup(group netip.AddrPort) netip.AddrPort {
	a := group.Addr().Unmap()
	if !a.IsMulticast() {
		return netip.AddrPort{}
	}
	n := a.Next()
	if !n.IsValid() || !n.IsMulticast() {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(n, group.Port())
}
