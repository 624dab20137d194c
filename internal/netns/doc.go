// Package netns builds throwaway test hosts: two network namespaces joined by
// a veth pair with addresses, optional GRO, static neighbour entries and
// cleanup that also runs when a test fails. Tests and benchmarks that need a
// real wire (XDP, AF_XDP, loss injection on a real interface) use it; nothing
// it creates touches the host's own interfaces.
//
// Usage in a test (root only; New skips with the reason otherwise):
//
//	p := netns.New(t, netns.DefaultConfig())   // removed by t.Cleanup
//	var conn *net.UDPConn
//	err := p.B.Do(func() error {                // on a locked thread inside B
//		var err error
//		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.B.Addr.AsSlice(), Port: 9000})
//		return err
//	})
//	// conn stays in B's namespace and may be used from any goroutine.
//	im, mode, err := p.B.AttachImpair(bpf.ImpairConfig{Port: 9000, DropFraction: 0.01, RecordType: -1})
//	defer im.Close()                            // detaches
//	im.Set(bpf.ImpairConfig{Port: 9000, DropFraction: 1, RecordType: -1}) // outage
//
// A socket belongs to the namespace it was created in, so create sockets (and
// attach XDP programs, which resolve ifindex in the caller's namespace) inside
// [Host.Do]; afterwards they can be used from any thread. [Create] and
// [Pair.Close] are the same without a testing.TB, for benchmarks.
//
// [NewLAN] and [CreateLAN] build N hosts on one Linux bridge instead, with
// the bridge and its ports in a switch namespace: a tc program on a port's
// egress ([Host.AttachTCImpair] on LAN.Ports[i]) impairs whatever is
// forwarded to host i, AF_XDP senders included.
//
// Names are unique per process and call (pid plus a counter), interface names
// stay within 15 bytes, and each pair uses 10.199.0.1/24 (A) and 10.199.0.2/24
// (B) by default: the namespaces are isolated, so concurrent pairs do not
// collide.
//
// The package shells out to ip(8) and ethtool(8) (iproute2, ethtool), which
// scripts/setup.sh installs. It must not be imported by the transport's library
// code; tests and bench tools (internal/pathbench, `cast bench paths`) use it.
package netns
