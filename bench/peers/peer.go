package peers

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

var (
	// ErrTimeout is returned by Recv when nothing arrived within
	// Config.Timeout (unreliable peers lose messages under loss).
	ErrTimeout = errors.New("peers: receive timeout")
	// ErrClosed is returned by Send and Recv after Close.
	ErrClosed = errors.New("peers: closed")
	// ErrCorrupt is returned when a received frame does not parse.
	ErrCorrupt = errors.New("peers: corrupt frame")
)

// Conn is one end of an established peer connection carrying messages.
// Send and Recv may be called from one goroutine each (A's and B's loops
// run on different threads); a Conn is not safe for concurrent Sends.
type Conn interface {
	// Send sends one message; p is owned by the caller and not retained.
	Send(p []byte) error
	// Recv waits for the next delivered message, copies it into p and
	// returns its length. Peers that spin busy-poll their socket.
	Recv(p []byte) (int, error)
}

// RoundTripper is implemented by an A side whose protocol has its own
// answer (stop-and-wait: DATA → ACK): RoundTrip sends p and returns when
// the answer for it arrived. The harness then measures RoundTrip instead
// of an echo.
type RoundTripper interface {
	RoundTrip(p []byte) error
}

// Flusher is implemented by an A side that batches sends (sendmmsg, GSO):
// Flush pushes out what Send queued.
type Flusher interface {
	Flush() error
}

// Poller is implemented by an A side that must keep serving its peer
// after the last Send (a MoldUDP64 publisher answers re-requests and
// sends heartbeats). The harness calls Poll in a loop on A's thread
// until B has everything or the run's deadline passes.
type Poller interface {
	Poll() error
}

// Counted is implemented by pairs that count protocol events.
type Counted interface {
	// Retransmits is the number of data retransmissions so far.
	Retransmits() int64
}

// Pair is a connected pair on loopback. Close makes blocked Send/Recv
// calls return ErrClosed (spinning ends notice within a few hundred
// spins); Release, when set, frees the sockets and must be called only
// after the loops using A and B have returned.
type Pair struct {
	A, B    Conn
	Close   func() error
	Release func()
	// Stats, when set, reports protocol counters (retransmits, ...).
	Stats Counted
}

// Config is what a peer is opened with.
type Config struct {
	// MsgSize is the largest message in bytes the pair must carry.
	MsgSize int
	// DropA and DropB are the probabilities (0..1) that A, resp. B,
	// discards a datagram it receives (loss injected at the receiver,
	// as the classic tools do). Only peers with Lossy set honour them.
	DropA, DropB float64
	// Timeout bounds every Recv; 0 means 2 s.
	Timeout time.Duration
	// Seed seeds the drop generators, so a loss pattern repeats.
	Seed uint64
	// Net, when set, puts A and B on two hosts (network namespaces
	// joined by a veth pair, where a kernel loss injector can sit)
	// instead of both on 127.0.0.1. Peers that cannot place their ends
	// refuse it (ErrNoNet).
	Net *Net
}

// Net is where a pair's two ends live: A's sockets are created by InA
// (in A's namespace) bound to A, B's by InB bound to B.
type Net struct {
	A, B     netip.Addr
	InA, InB func(func() error) error
	// TCPLoss says the link's loss injector drops TCP segments too, not
	// only UDP datagrams.
	TCPLoss bool
}

// ErrNoNet is returned by Open for a Config.Net the peer cannot use.
var ErrNoNet = errors.New("peers: this peer runs on loopback only")

var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// Side is where end A (b false) or B (b true) lives: its address and
// the function that creates its sockets (127.0.0.1 and a plain call
// without Net).
func (c Config) Side(b bool) (netip.Addr, func(func() error) error) {
	switch {
	case c.Net == nil:
		return loopback, func(f func() error) error { return f() }
	case b:
		return c.Net.B, c.Net.InB
	}
	return c.Net.A, c.Net.InA
}

// DefaultConfig is 1500-byte messages, no loss, 2 s receive timeout.
func DefaultConfig() Config {
	return Config{MsgSize: 1500, Timeout: 2 * time.Second, Seed: 1}
}

// Validate checks the ranges.
func (c Config) Validate() error {
	if c.MsgSize < 16 || c.MsgSize > 65000 {
		return fmt.Errorf("peers: message size %d out of 16..65000", c.MsgSize)
	}
	if c.DropA < 0 || c.DropA >= 1 || c.DropB < 0 || c.DropB >= 1 {
		return fmt.Errorf("peers: drop %v/%v out of [0,1)", c.DropA, c.DropB)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("peers: negative timeout")
	}
	return nil
}

// RecvTimeout is Timeout or its default.
func (c Config) RecvTimeout() time.Duration {
	if c.Timeout == 0 {
		return 2 * time.Second
	}
	return c.Timeout
}

// Peer describes one protocol.
type Peer struct {
	Name string
	// Mode is "spin" when Recv busy-polls a non-blocking socket on the
	// calling thread, "netpoll" when the library has its own goroutines
	// and Recv blocks on them.
	Mode string
	// Reliable peers deliver every message in order (or fail); the
	// harness counts losses of the others.
	Reliable bool
	// Lossy peers honour Config.DropA/DropB.
	Lossy bool
	// TCP peers carry their messages over TCP: nothing they deliver
	// arrives over UDP, and a loss injector that matches UDP misses them.
	TCP bool
	// Open connects a pair on loopback.
	Open func(Config) (*Pair, error)
	// Skip, when non-empty, says why this peer cannot run here.
	Skip string
}

// ListenPacket opens end A's (b false) or B's (b true) UDP socket on a
// kernel-chosen port where the config places it, for the peers whose
// library takes a net.PacketConn (KCP, QUIC).
func (c Config) ListenPacket(b bool) (pc net.PacketConn, err error) {
	addr, in := c.Side(b)
	err = in(func() (err error) {
		pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(addr, 0).String())
		return err
	})
	return pc, err
}
