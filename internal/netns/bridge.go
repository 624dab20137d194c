package netns

import (
	"errors"
	"fmt"
	"net/netip"
)

// BridgeConfig describes a star of test hosts: Hosts namespaces, each with
// one veth whose other end is a port of a Linux bridge in a namespace of
// its own (the "switch"). Multicast snooping is off, so the bridge floods
// every multicast datagram to all ports but the one it came in on, as an
// unmanaged switch does: every host sees each group's traffic without
// IGMP reports having to reach the bridge first.
type BridgeConfig struct {
	// Hosts is the number of host namespaces, 2..32. Host i has address
	// Subnet.Addr()+i+1 (and Subnet6.Addr()+i+1).
	Hosts int
	// Subnet is the IPv4 subnet of the hosts (default 10.198.0.0/24).
	Subnet netip.Prefix
	// Subnet6, when valid, also gives every host an IPv6 address in it
	// (added without duplicate address detection, so usable at once).
	Subnet6 netip.Prefix
	// GRO turns generic receive offload on for the hosts' veth ends.
	GRO bool
	// MTU of every veth end in bytes; 0 keeps 1500.
	MTU int
}

// DefaultBridgeConfig is n hosts on 10.198.0.0/24 and fd00:198::/64,
// GRO off, MTU 1500.
func DefaultBridgeConfig(n int) BridgeConfig {
	return BridgeConfig{
		Hosts:   n,
		Subnet:  netip.MustParsePrefix("10.198.0.0/24"),
		Subnet6: netip.MustParsePrefix("fd00:198::/64"),
	}
}

// Validate reports a configuration that cannot be built.
func (c BridgeConfig) Validate() error {
	if c.Hosts < 2 || c.Hosts > 32 {
		return fmt.Errorf("netns: bridge Hosts %d outside 2..32", c.Hosts)
	}
	if !c.Subnet.IsValid() || !c.Subnet.Addr().Is4() || c.Subnet.Bits() > 26 {
		return errors.New("netns: bridge Subnet must be an IPv4 prefix of /26 or shorter")
	}
	if c.Subnet6.IsValid() && (!c.Subnet6.Addr().Is6() || c.Subnet6.Addr().Is4In6() || c.Subnet6.Bits() > 120) {
		return errors.New("netns: bridge Subnet6 must be an IPv6 prefix of /120 or shorter")
	}
	if c.MTU != 0 && (c.MTU < 1280 || c.MTU > 65535) {
		return fmt.Errorf("netns: MTU %d outside 1280..65535", c.MTU)
	}
	return nil
}

// Bridge is a switch namespace and the host namespaces on its ports.
type Bridge struct {
	// Switch is the namespace holding the bridge and its ports.
	Switch string
	// Hosts are the host namespaces; Host.Link is each one's veth end.
	Hosts []Host
	// Ports are the bridge-side veth names, Ports[i] facing Hosts[i].
	Ports []string
	// Addr6 are the hosts' IPv6 addresses (empty without Subnet6).
	Addr6 []netip.Addr
	Cfg   BridgeConfig
}

// hostAddr is the i-th host address of p: the network address plus i+1.
func hostAddr(p netip.Prefix, i int) netip.Addr {
	a := p.Masked().Addr()
	for range i + 1 {
		a = a.Next()
	}
	return a
}

// Addr6Of returns host i's IPv6 address (invalid without Subnet6).
func (b *Bridge) Addr6Of(i int) netip.Addr {
	if i < len(b.Addr6) {
		return b.Addr6[i]
	}
	return netip.Addr{}
}
