package udp

import (
	"errors"
	"fmt"
	"github.com/walcast/walcast/datapath"
	"net/netip"
)

// Config configures a [Path].
type Config struct {
	// Local is the address to bind; port 0 picks a free one.
	Local netip.AddrPort
	// Peer, when valid, connects the socket: datagrams without an
	// address go there, and only its datagrams are received.
	Peer netip.AddrPort
	// SockBuf is SO_RCVBUF/SO_SNDBUF in bytes (default 8 MiB).
	SockBuf int
	// BusyPollUS is SO_BUSY_POLL in µs (default 50; 0 = off). It acts
	// only on devices with a NAPI id; see Path.NAPIID.
	BusyPollUS int
	// Multicast configures group sending and receiving (zero: none).
	// A receiver binds Local to the unspecified address on the group's
	// port and lists the groups; a sender names the interface. See
	// datapath.Multicast.
	Multicast datapath.Multicast
}

// DefaultConfig returns a Config bound to 127.0.0.1 on a free port.
func DefaultConfig() Config {
	return Config{
		Local:      netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0),
		SockBuf:    8 << 20,
		BusyPollUS: 50,
	}
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	if c.SockBuf < 0 || c.BusyPollUS < 0 {
		return errors.New("udp: SockBuf and BusyPollUS must be >= 0")
	}
	if c.Multicast.Enabled() {
		v6 := c.Local.IsValid() && c.Local.Addr().Is6() && !c.Local.Addr().Is4In6()
		if err := c.Multicast.Validate(v6); err != nil {
			return err
		}
	}
	if c.Local.IsValid() && c.Peer.IsValid() && c.Local.Addr().Unmap().Is4() != c.Peer.Addr().Unmap().Is4() {
		return fmt.Errorf("udp: local %s and peer %s are of different address families", c.Local, c.Peer)
	}
	return nil
}

// Stats are the path's counters (safe to read from any goroutine).
type Stats struct {
	Sent      uint64 // datagrams handed to the kernel
	Received  uint64 // datagrams received
	SendCalls uint64 // sendto calls
	RecvCalls uint64 // recvfrom calls, including empty polls
	EAGAIN    uint64 // sends refused with EAGAIN (socket buffer full)
	ENOBUFS   uint64 // sends refused with ENOBUFS
	Refused   uint64 // ECONNREFUSED/EHOSTUNREACH/ENETUNREACH seen (peer gone); datagram counted as lost
	Truncated uint64 // received datagrams larger than the Vec slot, dropped
}
