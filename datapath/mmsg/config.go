package mmsg

import (
	"net/netip"

	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/internal/sock"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/internal/defaults"
)

// Config configures a [Path]. A zero field means its default;
// [DefaultConfig] differs from the zero Config only in binding the
// loopback address.
type Config struct {
	// Local is the address to bind (default: the unspecified address of
	// Peer's family, IPv4 without a Peer); port 0 picks a free one.
	Local netip.AddrPort
	// Peer, when valid, connects the socket.
	Peer netip.AddrPort
	// SockBuf is SO_RCVBUF/SO_SNDBUF in bytes (default 8 MiB).
	SockBuf int
	// BusyPollUS is SO_BUSY_POLL in µs (default 50; negative: off).
	BusyPollUS int
	// Multicast configures group sending and receiving (zero: none).
	// A receiver binds Local to the unspecified address on the group's
	// port and lists the groups; a sender names the interface. See
	// datapath.Multicast.
	Multicast datapath.Multicast
	// Batch is the most datagrams one sendmmsg/recvmmsg moves (default 64).
	Batch int
	// NoGSO turns UDP GSO off. By default runs of equal-length frames
	// to one peer leave as UDP_SEGMENT super-datagrams, where
	// batch.ProbeGSO passes.
	NoGSO bool
	// NoGRO turns UDP GRO off. By default the kernel hands over
	// coalesced runs (split back into datagrams) where batch.ProbeGRO
	// passes; receive slots are then 64 KiB.
	NoGRO bool
	// GROSlots is the number of 64 KiB receive slots with GRO (default 16).
	GROSlots int
	// Coalesce packs consecutive frames to the same peer into one
	// datagram of up to MaxDatagram bytes, their exact bytes back to
	// back. Off by default: peers that expect one frame per datagram (the
	// reference's) interoperate.
	Coalesce bool
	// MaxDatagram is the datagram size limit for Coalesce in bytes: the
	// path MTU minus IP and UDP headers (default 1472 for a 1500 MTU).
	MaxDatagram int
}

// ErrConfig matches every configuration error of this package.
var ErrConfig = cfgerr.Sentinel("mmsg")

// DefaultConfig returns the defaults (GSO and GRO on where the kernel
// supports them, Coalesce off), bound to 127.0.0.1 on a free port (tests
// and one-host runs).
func DefaultConfig() Config {
	c := Config{Local: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)}.withDefaults()
	c.BusyPollUS = sock.DefaultBusyPollUS
	return c
}

// withDefaults returns c with every zero field set to its default
// (BusyPollUS and SockBuf are mapped by sock).
func (c Config) withDefaults() Config {
	sc := c.sock(false)
	c.SockBuf = sc.SockBuf
	c.Batch = defaults.Or(c.Batch, 64)
	c.GROSlots = defaults.Or(c.GROSlots, 16)
	c.MaxDatagram = defaults.Or(c.MaxDatagram, 1472)
	return c
}

// sock is the socket's configuration, with the defaults applied.
func (c Config) sock(gro bool) sock.Config {
	return sock.Config{Local: c.Local, Peer: c.Peer, SockBuf: c.SockBuf, BusyPollUS: c.BusyPollUS, Multicast: c.Multicast, GRO: gro}.WithDefaults()
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(field, f string, a ...any) error { return cfgerr.New("mmsg", ErrConfig, field, f, a...) }
	switch {
	case c.Batch < 1 || c.Batch > 1024:
		return bad("Batch", "%d outside 1..1024", c.Batch)
	case !c.NoGRO && c.GROSlots < 1:
		return bad("GROSlots", "%d < 1", c.GROSlots)
	case c.Coalesce && (c.MaxDatagram < 64 || c.MaxDatagram > 65507):
		return bad("MaxDatagram", "%d outside 64..65507", c.MaxDatagram)
	}
	return c.sock(false).Check("mmsg", ErrConfig)
}

// Features says which kernel offloads a Path uses and why not.
type Features struct {
	GSO       bool   // sending with UDP_SEGMENT
	GSOReason string // why GSO is off ("" when on)
	GRO       bool   // receiving with UDP_GRO
	GROReason string
	Coalesce  bool
	BusyPoll  int // SO_BUSY_POLL in effect, µs
}

// Stats are the path's counters (safe to read from any goroutine).
type Stats struct {
	Sent         uint64 // frames (Vec messages) handed to the kernel
	Received     uint64 // datagrams received (after GRO splitting)
	SendCalls    uint64 // sendmmsg calls
	RecvCalls    uint64 // recvmmsg calls, including empty polls
	EAGAIN       uint64 // sendmmsg refused with EAGAIN (socket buffer full)
	ENOBUFS      uint64 // sendmmsg refused with ENOBUFS
	Refused      uint64 // ECONNREFUSED/EHOSTUNREACH/ENETUNREACH (peer gone)
	Truncated    uint64 // received datagrams larger than their slot, dropped
	KernelDrops  uint64 // receive-queue overflows reported by the kernel (SO_RXQ_OVFL)
	GSOSupers    uint64 // GSO super-datagrams sent
	GROSegments  uint64 // datagrams split out of GRO super-datagrams
	GSOTurnedOff bool   // the kernel answered EIO to GSO and it was turned off
}
