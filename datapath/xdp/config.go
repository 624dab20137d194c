package xdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/internal/feature"
)

// ErrNotSupported is returned (wrapped) where AF_XDP is not available. It
// is walcast's one "not supported" value; errors.Is(err,
// errors.ErrUnsupported) holds too.
var ErrNotSupported = feature.ErrNotSupported

// ErrNoNeighbor is returned by Send for a destination whose MAC address is
// unknown (not the configured peer, not in the neighbour table at Open, and
// not seen as the source of a received datagram).
var ErrNoNeighbor = errors.New("xdp: no MAC address for destination")

// ErrMulticast is wrapped by Validate for a multicast Local or Peer: the
// AF_XDP path neither joins groups nor builds multicast frames; use
// datapath/udp or datapath/mmsg with datapath.Multicast (docs/xdp.md,
// "Multicast").
var ErrMulticast = errors.New("xdp: multicast groups are not supported on the AF_XDP path (use udp or mmsg)")

// ErrMultiQueue is wrapped by Open when the device has more RX queues than
// the one socket bound.
var ErrMultiQueue = errors.New("xdp: device has more RX queues than AF_XDP sockets")

// CopyMode selects how the socket binds.
type CopyMode int

const (
	// CopyAuto tries zero-copy and falls back to copy mode.
	CopyAuto CopyMode = iota
	// CopyForce always copies (XDP_COPY).
	CopyForce
	// ZeroCopyForce fails unless the driver supports zero-copy.
	ZeroCopyForce
)

// Config configures one AF_XDP path.
type Config struct {
	// Interface is the name of the device, in the network namespace of the
	// thread calling Open.
	Interface string
	// Queue is the RX/TX queue id the socket binds to.
	Queue int
	// Local is the IPv4 address and UDP port this path receives on. A zero
	// address takes the interface's first IPv4 address; the port must be
	// set.
	Local netip.AddrPort
	// Peer is the destination of messages whose address is zero. Optional
	// for a path that only answers (it learns the MAC of every source).
	Peer netip.AddrPort
	// PeerMAC is the Ethernet address of Peer; when nil it is read from the
	// neighbour table (/proc/net/arp), priming it with one kernel UDP
	// datagram to the peer's discard port if needed.
	PeerMAC net.HardwareAddr
	// RxFrames is the number of UMEM frames for receiving and the size of
	// the fill and RX rings (a power of two).
	RxFrames int
	// FillFrames is how many RX frames stay posted in the fill ring while
	// receiving is light; the path posts more, up to RxFrames, when it
	// finds a backlog, and returns to FillFrames when the backlog is gone
	// (a small hot set of frames is much faster: see docs/xdp.md, "Tail").
	// 0 is DefaultFillFrames; RxFrames keeps every frame posted.
	FillFrames int
	// TxFrames is the number of UMEM frames for sending and the size of the
	// TX and completion rings (a power of two).
	TxFrames int
	// FrameSize is the UMEM chunk size in bytes: 2048 or 4096.
	FrameSize int
	// Copy selects copy or zero-copy binding.
	Copy CopyMode
	// NeedWakeup sets XDP_USE_NEED_WAKEUP (the kernel says when a syscall
	// is needed). Off means a sendto after every TX batch.
	NeedWakeup bool
	// XDPMode is how the redirect program is attached (auto: native, then
	// generic).
	XDPMode bpf.Mode
	// Impair, when set, is embedded in the redirect program and drops
	// received datagrams before they reach the socket (tests).
	Impair *bpf.Impair
	// Sharers is how many more sockets may later share this path's UMEM
	// and queue through [Path.Share] (XDP_SHARED_UMEM), each receiving its
	// own UDP port: a NIC queue serving several streams. Their TX frames
	// (TxFrames each) are reserved in this path's UMEM, the redirect
	// program then steers by destination port, and the paths' fill and
	// completion rings are shared under a mutex, so each may run on its own
	// loop thread. 0 (the default) is one socket per queue, lock-free.
	Sharers int
	// TxBudget is how many descriptors one TX kick (sendto) may transmit
	// in copy mode: XDP_MAX_TX_SKB_BUDGET, Linux 6.17+, 32..TxFrames. 0
	// asks for TxFrames, so one kick drains the ring; a kernel without the
	// option keeps its fixed 32 and Send repeats the kick while it makes
	// progress (Path.TxBudget says which).
	TxBudget int
	// BusyPoll, when > 0, sets SO_BUSY_POLL (µs) and SO_PREFER_BUSY_POLL on
	// the socket, and Recv makes a non-blocking recvfrom on every empty
	// poll, which runs the device's NAPI poll on the calling thread, but
	// only where the socket has a NAPI context to poll: the kernel learns
	// it from the first frames, so the path reads SO_INCOMING_NAPI_ID then
	// and starts busy polling only if it is not 0 (it is 0 on veth, native
	// or generic, on Linux 6.18, and with generic XDP anywhere: those calls
	// would poll nothing). Stats.BusyPolling says which. 0 never
	// busy-polls.
	BusyPoll int
	// BusyPollAlways keeps the busy-poll recvfrom on every empty poll even
	// where it polls nothing (no NAPI id). Only for measuring what that
	// costs (`cast bench paths -paths xdp-native-busyalways`).
	BusyPollAlways bool
}

// DefaultConfig is queue 0, 2048 RX and 2048 TX frames of 2048 bytes
// (8 MiB of UMEM), copy mode unless zero-copy works, need-wakeup on,
// auto XDP mode, busy polling for 50 µs where the device has a NAPI
// context for the socket (not veth). Interface and Local's port must
// be set.
func DefaultConfig() Config {
	return Config{
		RxFrames:   2048,
		TxFrames:   2048,
		FrameSize:  2048,
		NeedWakeup: true,
		BusyPoll:   50,
	}
}

// DefaultFillFrames is FillFrames' default.
const DefaultFillFrames = 256

// headerLen is Ethernet (14) + IPv4 without options (20) + UDP (8).
const headerLen = 14 + 20 + 8

// MaxPayload is the largest UDP payload of a frame of the given size.
func (c Config) MaxPayload() int { return c.FrameSize - headerLen }

// Validate reports a configuration Open would reject.
func (c Config) Validate() error {
	pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	switch {
	case c.Interface == "":
		return errors.New("xdp: Interface is empty")
	case c.Queue < 0:
		return fmt.Errorf("xdp: Queue %d is negative", c.Queue)
	case c.Local.Port() == 0:
		return errors.New("xdp: Local port is 0")
	case c.Local.Addr().IsMulticast() || c.Peer.Addr().IsMulticast():
		return fmt.Errorf("%w: Local %v, Peer %v", ErrMulticast, c.Local, c.Peer)
	case c.Local.Addr().IsValid() && !c.Local.Addr().Is4():
		return fmt.Errorf("xdp: Local %v is not IPv4", c.Local)
	case c.Peer.IsValid() && !c.Peer.Addr().Is4():
		return fmt.Errorf("xdp: Peer %v is not IPv4", c.Peer)
	case c.PeerMAC != nil && len(c.PeerMAC) != 6:
		return fmt.Errorf("xdp: PeerMAC %v is not an Ethernet address", c.PeerMAC)
	case !pow2(c.RxFrames) || !pow2(c.TxFrames):
		return fmt.Errorf("xdp: RxFrames %d and TxFrames %d must be powers of two", c.RxFrames, c.TxFrames)
	case c.RxFrames+c.TxFrames > 1<<20:
		return fmt.Errorf("xdp: %d frames is more than 1 Mi", c.RxFrames+c.TxFrames)
	case c.FrameSize != 2048 && c.FrameSize != 4096:
		return fmt.Errorf("xdp: FrameSize %d is not 2048 or 4096", c.FrameSize)
	case c.Copy < CopyAuto || c.Copy > ZeroCopyForce:
		return fmt.Errorf("xdp: Copy mode %d unknown", c.Copy)
	case c.BusyPoll < 0:
		return fmt.Errorf("xdp: BusyPoll %d is negative", c.BusyPoll)
	case c.FillFrames < 0 || c.FillFrames > c.RxFrames:
		return fmt.Errorf("xdp: FillFrames %d outside 0..RxFrames (%d)", c.FillFrames, c.RxFrames)
	case c.Sharers < 0 || c.Sharers > 63:
		return fmt.Errorf("xdp: Sharers %d outside 0..63", c.Sharers)
	case c.RxFrames+(1+c.Sharers)*c.TxFrames > 1<<20:
		return fmt.Errorf("xdp: %d frames with %d sharers is more than 1 Mi", c.RxFrames+(1+c.Sharers)*c.TxFrames, c.Sharers)
	case c.TxBudget != 0 && (c.TxBudget < 32 || c.TxBudget > c.TxFrames):
		return fmt.Errorf("xdp: TxBudget %d outside 32..TxFrames (%d), or 0", c.TxBudget, c.TxFrames)
	}
	return nil
}

// Stats counts a path's events since Open. Kernel* fields are the socket's
// XDP_STATISTICS.
type Stats struct {
	RxPackets uint64 // datagrams handed to Recv's caller
	RxInvalid uint64 // frames dropped by the parser: not IPv4/UDP to our port, bad IP checksum or lengths
	RxTooBig  uint64 // payloads larger than the caller's slot, dropped
	TxPackets uint64 // datagrams placed on the TX ring
	TxFull    uint64 // Send calls that stopped early for lack of TX frames
	TxKicks   uint64 // sendto calls that drove transmission
	TxAgain   uint64 // sendto answered EAGAIN: the per-call budget (32) ran out, or no completion slot
	TxDropped uint64 // sendto answered EBUSY/ENOBUFS: the device dropped a frame the kernel had taken (copy mode; veth: peer ring full)
	RecvKicks uint64 // recvfrom calls: busy polls of the device, or fill-ring wakeups
	// BusyPolling says whether empty polls busy-poll: BusyPoll > 0, frames
	// arrived, and the socket has a NAPI context.
	BusyPolling bool

	KernelRxDropped        uint64 // dropped by the kernel (for example RX ring full)
	KernelRxInvalidDescs   uint64
	KernelTxInvalidDescs   uint64
	KernelRxRingFull       uint64
	KernelRxFillRingEmpty  uint64
	KernelTxRingEmptyDescs uint64
}
