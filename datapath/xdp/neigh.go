package xdp

import "net/netip"

// neighbors is a small fixed cache of IPv4 → MAC, filled from the peer at
// Open and from the source of every received datagram, so a receiver can
// answer its senders (NAKs) without a neighbour-table read. It never
// allocates; the oldest entry is replaced when full.
type neighbors struct {
	ip   [16]netip.Addr
	mac  [16][6]byte
	next int
}

func (n *neighbors) learn(ip netip.Addr, mac [6]byte) {
	for i := range n.ip {
		if n.ip[i] == ip {
			n.mac[i] = mac
			return
		}
	}
	n.ip[n.next], n.mac[n.next] = ip, mac
	n.next = (n.next + 1) % len(n.ip)
}

func (n *neighbors) lookup(ip netip.Addr) *[6]byte {
	for i := range n.ip {
		if n.ip[i] == ip {
			return &n.mac[i]
		}
	}
	return nil
}
