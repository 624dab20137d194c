package udp

import (
	"net/netip"

	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/internal/sock"
	"github.com/walcast/walcast/internal/cfgerr"
)

// Config configures a [Path]. A zero field means its default;
// [DefaultConfig] differs from the zero Config only in binding the
// loopback address.
type Config struct {
	// Local is the address to bind (default: the unspecified address of
	// Peer's family, IPv4 without a Peer); port 0 picks a free one.
	Local netip.AddrPort
	// Peer, when valid, connects the socket: datagrams without an
	// address go there, and only its datagrams are received.
	Peer netip.AddrPort
	// SockBuf is SO_RCVBUF/SO_SNDBUF in bytes (default 8 MiB).
	SockBuf int
	// BusyPollUS is SO_BUSY_POLL in µs (default 50; negative: off). It
	// acts only on devices with a NAPI id; see Path.NAPIID.
	BusyPollUS int
	// Multicast configures group sending and receiving (zero: none).
	// A receiver binds Local to the unspecified address on the group's
	// port and lists the groups; a sender names the interface. See
	// datapath.Multicast.
	Multicast datapath.Multicast
}

// ErrConfig matches every configuration error of this package.
var ErrConfig = cfgerr.Sentinel("udp")

// DefaultConfig returns the defaults, bound to 127.0.0.1 on a free port
// (tests and one-host runs).
func DefaultConfig() Config {
	return Config{
		Local:      netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0),
		SockBuf:    sock.DefaultSockBuf,
		BusyPollUS: sock.DefaultBusyPollUS,
	}
}

// sock is the socket's configuration, with the defaults applied.
func (c Config) sock() sock.Config {
	return sock.Config{Local: c.Local, Peer: c.Peer, SockBuf: c.SockBuf, BusyPollUS: c.BusyPollUS, Multicast: c.Multicast}.WithDefaults()
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error { return c.sock().Check("udp", ErrConfig) }

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
