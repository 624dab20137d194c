package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Config describes the veth pair.
type Config struct {
	// AddrA and AddrB are the addresses (with prefix length) of the A and
	// B ends.
	AddrA, AddrB netip.Prefix
	// Queues is the number of rx and tx queues of each veth end. The
	// default 1 makes every packet arrive on queue 0 (the kernel's own
	// default of 2 would split flows over two AF_XDP queues).
	Queues int
	// GRO turns generic receive offload on for both ends (which also puts
	// veth into NAPI mode, so SO_BUSY_POLL acts); false turns it off.
	GRO bool
	// MTU of both ends in bytes; 0 keeps the default (1500).
	MTU int
	// StaticNeigh installs permanent neighbour (ARP) entries for the peer
	// on both ends, so a hand-built Ethernet frame finds its destination MAC
	// in /proc/net/arp without priming.
	StaticNeigh bool
	// Tag, when set, goes into the namespace names (walcast-TAG-ID-a), so a
	// leftover namespace says who made it. Letters, digits and '-' only.
	Tag string
}

// DefaultConfig is 10.199.0.1/24 ↔ 10.199.0.2/24, one queue, GRO off, MTU
// 1500, static neighbours.
func DefaultConfig() Config {
	return Config{
		AddrA:       netip.MustParsePrefix("10.199.0.1/24"),
		AddrB:       netip.MustParsePrefix("10.199.0.2/24"),
		Queues:      1,
		StaticNeigh: true,
	}
}

// Validate reports a configuration that cannot be built.
func (c Config) Validate() error {
	if !c.AddrA.IsValid() || !c.AddrB.IsValid() || !c.AddrA.Addr().Is4() || !c.AddrB.Addr().Is4() {
		return errors.New("netns: AddrA and AddrB must be IPv4 prefixes")
	}
	if c.AddrA.Addr() == c.AddrB.Addr() {
		return errors.New("netns: AddrA and AddrB are equal")
	}
	if c.Queues < 1 || c.Queues > 64 {
		return fmt.Errorf("netns: Queues %d outside 1..64", c.Queues)
	}
	if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
		return fmt.Errorf("netns: MTU %d outside 68..65535", c.MTU)
	}
	return validTag(c.Tag)
}

// validTag accepts "" or up to 16 letters, digits and dashes.
func validTag(tag string) error {
	if len(tag) > 16 {
		return fmt.Errorf("netns: Tag %q longer than 16 bytes", tag)
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("netns: Tag %q: only letters, digits and '-'", tag)
		}
	}
	return nil
}

// nsPrefix is "walcast-" or "walcast-TAG-".
func nsPrefix(tag string) string {
	if tag == "" {
		return "walcast-"
	}
	return "walcast-" + tag + "-"
}

// Host is one end of the pair.
type Host struct {
	NS     string           // namespace name (a file in /run/netns)
	Link   string           // veth name inside NS (at most 15 bytes)
	Index  int              // ifindex of Link inside NS
	Addr   netip.Addr       // IPv4 address of Link
	Prefix netip.Prefix     // Addr with its prefix length
	MAC    net.HardwareAddr // hardware address of Link
	Addr6  netip.Addr       // IPv6 address of Link (LAN with Prefix6 only)
}

// Pair is two namespaces joined by one veth pair.
type Pair struct {
	A, B Host
	Cfg  Config
}
