package netns

import (
	"fmt"
	"net/netip"
)

// LANConfig describes hosts joined by one Linux bridge: every host is a
// namespace with one veth link whose peer is a port of the bridge, and the
// bridge and its ports live in a switch namespace of their own. A tc
// program on a port's egress sees every frame the switch forwards to that
// host, whatever sent it (kernel UDP, sendmmsg/GSO, AF_XDP): that is where
// per-receiver loss goes.
type LANConfig struct {
	// Hosts is the number of hosts, 2..16.
	Hosts int
	// Prefix is the subnet; host i gets address Prefix.Addr()+i+1.
	Prefix netip.Prefix
	// Queues is the number of rx and tx queues of each veth end (1).
	Queues int
	// MTU of every link in bytes; 0 keeps the default (1500).
	MTU int
	// SegmentOffload keeps UDP segmentation offload on the hosts' links.
	// Off (the default), a UDP GSO super-datagram is segmented in software
	// when it leaves its host, so the switch forwards, and an injector
	// drops, one datagram at a time, as on a real wire; on, veth carries
	// the super-datagram whole and a drop loses all its segments at once.
	SegmentOffload bool
	// StaticNeigh installs permanent neighbour entries for every other
	// host on each host.
	StaticNeigh bool
	// Tag goes into the namespace names, as in Config.
	Tag string
	// Prefix6, when valid, also gives host i the IPv6 address
	// Prefix6.Addr()+i+1 (Host.Addr6), added without duplicate address
	// detection so it is usable at once.
	Prefix6 netip.Prefix
}

// DefaultLANConfig is two hosts on 10.199.1.0/24, one queue, MTU 1500,
// segmentation in software, static neighbours.
func DefaultLANConfig() LANConfig {
	return LANConfig{Hosts: 2, Prefix: netip.MustParsePrefix("10.199.1.0/24"), Queues: 1, StaticNeigh: true}
}

// Validate reports a configuration that cannot be built.
func (c LANConfig) Validate() error {
	if c.Hosts < 2 || c.Hosts > 16 {
		return fmt.Errorf("netns: LAN Hosts %d outside 2..16", c.Hosts)
	}
	if !c.Prefix.IsValid() || !c.Prefix.Addr().Is4() || c.Prefix.Bits() > 27 {
		return fmt.Errorf("netns: LAN Prefix %v must be an IPv4 prefix of /27 or wider", c.Prefix)
	}
	if c.Queues < 1 || c.Queues > 64 {
		return fmt.Errorf("netns: Queues %d outside 1..64", c.Queues)
	}
	if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
		return fmt.Errorf("netns: MTU %d outside 68..65535", c.MTU)
	}
	if c.Prefix6.IsValid() && (!c.Prefix6.Addr().Is6() || c.Prefix6.Addr().Is4In6() || c.Prefix6.Bits() > 120) {
		return fmt.Errorf("netns: LAN Prefix6 %v must be an IPv6 prefix of /120 or wider", c.Prefix6)
	}
	return validTag(c.Tag)
}

// LAN is hosts on a bridge.
type LAN struct {
	Hosts []Host
	// Ports[i] is the bridge port facing Hosts[i], in the switch
	// namespace (no address): use its Do, Exec and Index to attach
	// programs there.
	Ports []Host
	// Switch is the namespace of the bridge and its ports; Bridge the
	// bridge's name.
	Switch, Bridge string
	Cfg            LANConfig
}

// hostAddr is the i-th host address of p: the network address plus i+1.
func hostAddr(p netip.Prefix, i int) netip.Addr {
	a := p.Masked().Addr()
	for range i + 1 {
		a = a.Next()
	}
	return a
}
