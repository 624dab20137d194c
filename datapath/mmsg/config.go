package mmsg

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
	// Peer, when valid, connects the socket.
	Peer netip.AddrPort
	// SockBuf is SO_RCVBUF/SO_SNDBUF in bytes (default 8 MiB).
	SockBuf int
	// BusyPollUS is SO_BUSY_POLL in µs (default 50; 0 = off).
	BusyPollUS int
	// Multicast configures group sending and receiving (zero: none).
	// A receiver binds Local to the unspecified address on the group's
	// port and lists the groups; a sender names the interface. See
	// datapath.Multicast.
	Multicast datapath.Multicast
	// Batch is the most datagrams one sendmmsg/recvmmsg moves (default 64).
	Batch int
	// GSO sends runs of equal-length frames as UDP_SEGMENT
	// super-datagrams when batch.ProbeGSO passes (default on).
	GSO bool
	// GRO enables UDP_GRO on receive when batch.ProbeGRO passes (default
	// on); receive slots are then 64 KiB.
	GRO bool
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

// DefaultConfig returns a Config bound to 127.0.0.1 on a free port with
// GSO and GRO on (where the kernel supports them) and Coalesce off.
func DefaultConfig() Config {
	return Config{
		Local:       netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0),
		SockBuf:     8 << 20,
		BusyPollUS:  50,
		Batch:       64,
		GSO:         true,
		GRO:         true,
		GROSlots:    16,
		MaxDatagram: 1472,
	}
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	if c.SockBuf < 0 || c.BusyPollUS < 0 {
		return errors.New("mmsg: SockBuf and BusyPollUS must be >= 0")
	}
	if c.Batch < 1 || c.Batch > 1024 {
		return fmt.Errorf("mmsg: Batch %d outside 1..1024", c.Batch)
	}
	if c.GRO && c.GROSlots < 1 {
		return fmt.Errorf("mmsg: GROSlots %d < 1", c.GROSlots)
	}
	if c.Coalesce && (c.MaxDatagram < 64 || c.MaxDatagram > 65507) {
		return fmt.Errorf("mmsg: MaxDatagram %d outside 64..65507", c.MaxDatagram)
	}
	if c.Multicast.Enabled() {
		v6 := c.Local.IsValid() && c.Local.Addr().Is6() && !c.Local.Addr().Is4In6()
		if err := c.Multicast.Validate(v6); err != nil {
			return err
		}
	}
	if c.Local.IsValid() && c.Peer.IsValid() && c.Local.Addr().Unmap().Is4() != c.Peer.Addr().Unmap().Is4() {
		return fmt.Errorf("mmsg: local %s and peer %s are of different address families", c.Local, c.Peer)
	}
	return nil
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
