package protocol

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/walcast/walcast/wire"
)

// ErrConfig matches every configuration error returned by Validate and by
// the constructors.
var ErrConfig = errors.New("protocol: invalid configuration")

// Defaults: the reference implementation's, except where walcast
// departs from it for a measured reason (noted per constant).
const (
	DefaultMaxFrame          = 1472 // bytes, header included: one IPv4 UDP datagram on a 1500-byte MTU
	DefaultSendRingSlots     = 4096 // records kept hot for retransmission
	DefaultReorderSlots      = 2048 // records the receiver buffers ahead of a gap
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultRetxDedupWindow   = time.Millisecond
	DefaultNakDebounce       = 50 * time.Millisecond
	DefaultMaxNakRetries     = 24 // spec: 8; raised so 30 % loss both ways repairs (docs/protocol.md)
	DefaultSilenceIntervals  = 10 // heartbeat intervals without data or heartbeat
	DefaultMaxNakRunsPerPump = 64
	DefaultMaxColdInFlight   = 4
	DefaultMaxColdQueued     = 60
	DefaultMaxColdRecords    = 256
	DefaultColdRate          = 50_000 // records/s served from the WAL at most (docs/protocol.md)
	DefaultColdBurst         = 4096   // records: one NAK clamped to the default ring

	// Flow control, RTT and probes (walcast extensions, docs/protocol.md).
	DefaultReceiverTimeout  = time.Second // a receiver silent this long is dropped from flow control
	DefaultMaxReceivers     = 8
	DefaultProbeFloor       = 50 * time.Microsecond  // shortest tail-loss probe timeout
	DefaultRTTProbeInterval = 10 * time.Millisecond  // an RTT probe at least this often while data flows
	DefaultStatusInterval   = time.Millisecond       // Status at most this often unless urgent
	DefaultNakFloor         = 200 * time.Microsecond // shortest adaptive re-NAK delay
	DefaultOverrunEvidence  = 64                     // datagrams beyond the window before Reconnect
	// MaxReceivers bounds SenderConfig.MaxReceivers.
	MaxReceivers = 4096

	// MaxDatagram is the largest UDP payload an IPv4 datagram can carry;
	// MaxFrame may not exceed it.
	MaxDatagram = 65507
	// maxColdRate bounds ColdRate and ColdBurst so that the token bucket's
	// record·ns arithmetic cannot overflow.
	maxColdRate = 1 << 30
	// minDataFrame is a header plus the 8-byte seq.
	minDataFrame = wire.HeaderSize + 8
)

// SenderConfig configures a [Sender]. A zero field means its default
// (DefaultSenderConfig shows them), so SenderConfig{} is a valid config.
type SenderConfig struct {
	// Dest is where data, retransmits and heartbeats are sent. The zero
	// value means the datapath's connected peer.
	Dest netip.AddrPort
	// NakSource is the only address whose NAKs are served. Zero means
	// Dest; when both are zero (a connected datapath, where the kernel
	// already filters by peer) every source is accepted.
	NakSource netip.AddrPort
	// AcceptAnyNakSource serves NAKs from any address. Off, NAKs from
	// any other source than NakSource are dropped, so a stranger cannot
	// make the sender retransmit.
	AcceptAnyNakSource bool
	// MaxFrame is the largest frame in bytes, header included. It sets
	// the send-ring slot size (rounded up to 64) and, with Coalesce, the
	// largest datagram.
	MaxFrame int
	// RingSlots is the number of records kept in the hot send ring; a
	// power of two. It also clamps the count of an incoming NAK.
	RingSlots int
	// HeartbeatInterval is the idle time after which Tick sends a
	// heartbeat. Data sends reset it; retransmits do not.
	HeartbeatInterval time.Duration
	// RetxDedupWindow suppresses a second retransmit of the same ring
	// slot within this time (default 1 ms; negative: no dedup).
	RetxDedupWindow time.Duration
	// MaxColdInFlight caps the cold reads running at once (handed out by
	// ColdRequests and not yet finished).
	MaxColdInFlight int
	// MaxColdQueued caps the cold requests waiting for one of those;
	// NAKed seqs beyond are dropped (the receiver asks again). Default
	// 60; negative: no queue.
	MaxColdQueued int
	// MaxColdRecords is the largest Count of one ColdRequest.
	MaxColdRecords int
	// ColdRate and ColdBurst budget the records served from the WAL (a
	// token bucket: ColdRate records/s, at most ColdBurst at once), so
	// that NAKs for old seqs, a flood included, cannot amplify from the
	// disk beyond it. NAKed cold seqs over budget are dropped and counted
	// (the receiver asks again). A cold seq served within
	// RetxDedupWindow, or covered by a queued or running read, is not
	// read again.
	ColdRate  int64
	ColdBurst int64
	// Coalesce packs consecutive data frames into one datagram of up to
	// MaxFrame bytes: the exact contiguous bytes of the WAL. Off by
	// default, so that receivers expecting one frame per datagram (the
	// reference's) interoperate; walcast receivers accept both forms.
	Coalesce bool

	// NoFlowControl ignores the Status frames of receivers altogether:
	// the reference's behaviour (no InitialWindow either). By default the
	// Sender honours them (negotiated per receiver: nothing changes on
	// the wire until one is heard).
	NoFlowControl bool
	// ReceiverTimeout is how long a receiver may stay silent
	// before it is dropped from flow control (event ReceiverLost).
	ReceiverTimeout time.Duration
	// MaxReceivers is the size of the flow-control table (1..4096).
	MaxReceivers int
	// FlowPolicy combines the windows of several receivers (a multicast
	// group): FlowMin (default), FlowMax or FlowTagged (flow_group.go).
	FlowPolicy FlowPolicy
	// Tagged are the receiver ids FlowTagged waits for
	// (ReceiverConfig.ID); the others are not waited for.
	Tagged []uint64
	// ProbeFloor is the shortest tail-loss probe timeout; the timeout
	// is clamp(2·srtt, ProbeFloor, HeartbeatInterval).
	ProbeFloor time.Duration
	// RTTProbeInterval is how often a probe goes out while data
	// flows, so the RTT estimate follows the path.
	RTTProbeInterval time.Duration
	// ID is the sender id carried in probes; 0 draws a random one.
	ID uint64
	// InitialWindow bounds the records a fresh Sender sends before it has
	// heard any Status, for at most InitialWait after its first Send:
	// an unpaced producer then cannot outrun a walcast receiver's window
	// before that receiver's first Status arrives. A receiver that never
	// sends Status (the reference's) is recognised within a few round
	// trips by a NAK with no Status: the window's last record goes out
	// after a heartbeat announcing it, which every receiver that heard the
	// stream NAKs. The window is then released; if nothing answers (no
	// receiver running yet) it holds until InitialWait. The bytes stay
	// the reference's kinds. InitialWindow < 0
	// turns it off (defaults: DefaultReorderSlots records, and
	// ReceiverTimeout's default, long enough for a loaded machine to get a
	// starting receiver running: docs/protocol.md).
	InitialWindow int
	InitialWait   time.Duration
}

// DefaultSenderConfig returns the spec defaults. Dest and NakSource are
// left zero (connected peer).
func DefaultSenderConfig() SenderConfig {
	return SenderConfig{
		MaxFrame:          DefaultMaxFrame,
		RingSlots:         DefaultSendRingSlots,
		HeartbeatInterval: DefaultHeartbeatInterval,
		RetxDedupWindow:   DefaultRetxDedupWindow,
		MaxColdInFlight:   DefaultMaxColdInFlight,
		MaxColdQueued:     DefaultMaxColdQueued,
		MaxColdRecords:    DefaultMaxColdRecords,
		ColdRate:          DefaultColdRate,
		ColdBurst:         DefaultColdBurst,
		ReceiverTimeout:   DefaultReceiverTimeout,
		MaxReceivers:      DefaultMaxReceivers,
		ProbeFloor:        DefaultProbeFloor,
		RTTProbeInterval:  DefaultRTTProbeInterval,
		InitialWindow:     DefaultReorderSlots,
		InitialWait:       DefaultReceiverTimeout,
	}
}

// Validate reports the first nonsensical field, wrapped in ErrConfig.
func (c SenderConfig) Validate() error {
	c = c.withDefaults()
	if err := validFrame(c.MaxFrame); err != nil {
		return err
	}
	if !pow2(c.RingSlots) {
		return fmt.Errorf("%w: RingSlots %d is not a power of two ≥ 2", ErrConfig, c.RingSlots)
	}
	if c.HeartbeatInterval <= 0 {
		return fmt.Errorf("%w: HeartbeatInterval %v must be > 0", ErrConfig, c.HeartbeatInterval)
	}
	if c.RetxDedupWindow < 0 {
		return fmt.Errorf("%w: RetxDedupWindow %v must be ≥ 0", ErrConfig, c.RetxDedupWindow)
	}
	if c.MaxColdInFlight < 1 {
		return fmt.Errorf("%w: MaxColdInFlight %d must be ≥ 1", ErrConfig, c.MaxColdInFlight)
	}
	if c.MaxColdQueued < 0 {
		return fmt.Errorf("%w: MaxColdQueued %d must be ≥ 0", ErrConfig, c.MaxColdQueued)
	}
	if c.MaxColdRecords < 1 {
		return fmt.Errorf("%w: MaxColdRecords %d must be ≥ 1", ErrConfig, c.MaxColdRecords)
	}
	if c.ColdRate < 1 || c.ColdRate > maxColdRate {
		return fmt.Errorf("%w: ColdRate %d records/s must be in 1..%d", ErrConfig, c.ColdRate, maxColdRate)
	}
	if c.ColdBurst < 1 || c.ColdBurst > maxColdRate {
		return fmt.Errorf("%w: ColdBurst %d records must be in 1..%d", ErrConfig, c.ColdBurst, maxColdRate)
	}
	if c.ReceiverTimeout <= 0 {
		return fmt.Errorf("%w: ReceiverTimeout %v must be > 0", ErrConfig, c.ReceiverTimeout)
	}
	if c.MaxReceivers < 1 || c.MaxReceivers > MaxReceivers {
		return fmt.Errorf("%w: MaxReceivers %d must be in 1..%d", ErrConfig, c.MaxReceivers, MaxReceivers)
	}
	if err := c.validFlowPolicy(); err != nil {
		return err
	}
	if c.InitialWait < 0 {
		return fmt.Errorf("%w: InitialWait %v must be ≥ 0", ErrConfig, c.InitialWait)
	}
	if c.ProbeFloor <= 0 || c.RTTProbeInterval <= 0 {
		return fmt.Errorf("%w: ProbeFloor %v and RTTProbeInterval %v must be > 0", ErrConfig, c.ProbeFloor, c.RTTProbeInterval)
	}
	return nil
}

// ReceiverConfig configures a [Receiver]. A zero field means its default
// (DefaultReceiverConfig shows them), so ReceiverConfig{} is a valid
// config.
type ReceiverConfig struct {
	// Sender is where NAKs are sent (statically configured, never learnt
	// from traffic). The zero value means the datapath's connected peer.
	Sender netip.AddrPort
	// MaxFrame is the largest frame in bytes, header included; it sets
	// the reorder-slot size (rounded up to 64). It must be at least the
	// sender's MaxFrame.
	MaxFrame int
	// ReorderSlots is the reorder window in records, a power of two. A
	// record (or announced highest seq) at distance ≥ ReorderSlots ahead
	// of the next expected seq raises Reconnect at once (a distance
	// check, not the reference's lazy slot-collision rule).
	ReorderSlots int
	// NakDebounce is the minimum time between two NAKs of the same
	// missing run (default 50 ms; negative: re-NAK on every pump).
	NakDebounce time.Duration
	// MaxNakRetries is the retry budget of a missing run: the NAK that
	// makes a run's count exceed it raises Faulted. With 8, the ninth NAK
	// of a run faults (default 24; negative: no retry, the first re-NAK
	// faults).
	MaxNakRetries int
	// HeartbeatInterval is the sender's heartbeat interval; silence
	// is measured in it.
	HeartbeatInterval time.Duration
	// SilenceIntervals × HeartbeatInterval without data or heartbeat is
	// silence: Faulted when a gap is open, else a PeerSilent event.
	SilenceIntervals int
	// MaxNakRunsPerPump caps the NAKs one pump sends (default 64): every
	// missing run in the reorder window is NAKed, not only the oldest.
	MaxNakRunsPerPump int
	// Start is the first seq to deliver; 0 means the stream's first (seq
	// 1). The Receiver expects it from the outset: records missing
	// before the first one heard are NAKed like any other gap, and a
	// stream already ReorderSlots or more ahead raises Reconnect (catch
	// up over replay from Start). Delivery never begins later silently.
	Start uint64
	// StartNow starts at "now" instead: at the first data record heard,
	// or just after the highest seq of the first heartbeat heard,
	// whichever comes first. Records before it are not delivered;
	// [Receiver.LateStart] reports where delivery began when that is
	// after seq 1. Start must be 0.
	StartNow bool

	// NoStatus sends no Status frames: the receiver's bytes are the
	// reference's. By default it sends them (flow control,
	// acknowledgement, RTT echo) once it has heard from its sender.
	NoStatus bool
	// ID is the receiver id carried in Status; 0 draws a random one.
	ID uint64
	// StatusInterval is the shortest time between two Status frames that
	// are not urgent.
	StatusInterval time.Duration
	// NakFloor is the shortest adaptive re-NAK delay (< 0: none). While the
	// sender speaks probes the first re-NAK of a run waits
	// clamp(srtt + 4·rttvar, NakFloor, NakDebounce), each later one twice
	// the previous, up to NakDebounce. It is also the pinned re-NAK delay
	// of a unicast receiver: the window's oldest gap, while every seq up
	// to the highest edge it advertised is known to exist, is NAKed again
	// after NakFloor (doubling per retry) if that is sooner (docs/protocol.md,
	// "RTT-adaptive repair"; < 0 turns that off too).
	NakFloor time.Duration
	// NakBackoff bounds the randomised delay before a NAK in a multicast
	// group, in percent of the smoothed RTT (0: DefaultNakBackoff, 8 RTTs;
	// negative: no back-off). It applies only while other receivers are
	// heard on the control group; a receiver alone NAKs at once.
	NakBackoff int
	// OverrunEvidence is how many datagrams beyond the reorder window,
	// arriving over at least NakDebounce with no pause as long, raise
	// Reconnect. One datagram never does.
	OverrunEvidence int
}

// DefaultReceiverConfig returns the spec defaults with Sender zero
// (connected peer).
func DefaultReceiverConfig() ReceiverConfig {
	return ReceiverConfig{
		MaxFrame:          DefaultMaxFrame,
		ReorderSlots:      DefaultReorderSlots,
		NakDebounce:       DefaultNakDebounce,
		MaxNakRetries:     DefaultMaxNakRetries,
		HeartbeatInterval: DefaultHeartbeatInterval,
		SilenceIntervals:  DefaultSilenceIntervals,
		MaxNakRunsPerPump: DefaultMaxNakRunsPerPump,
		StatusInterval:    DefaultStatusInterval,
		NakFloor:          DefaultNakFloor,
		OverrunEvidence:   DefaultOverrunEvidence,
		NakBackoff:        DefaultNakBackoff,
	}
}

// Validate reports the first nonsensical field, wrapped in ErrConfig.
func (c ReceiverConfig) Validate() error {
	c = c.withDefaults()
	if err := validFrame(c.MaxFrame); err != nil {
		return err
	}
	if !pow2(c.ReorderSlots) {
		return fmt.Errorf("%w: ReorderSlots %d is not a power of two ≥ 2", ErrConfig, c.ReorderSlots)
	}
	if c.NakDebounce < 0 {
		return fmt.Errorf("%w: NakDebounce %v must be ≥ 0", ErrConfig, c.NakDebounce)
	}
	if c.MaxNakRetries < 0 || c.MaxNakRetries > 65534 {
		return fmt.Errorf("%w: MaxNakRetries %d must be in 0..65534", ErrConfig, c.MaxNakRetries)
	}
	if c.HeartbeatInterval <= 0 {
		return fmt.Errorf("%w: HeartbeatInterval %v must be > 0", ErrConfig, c.HeartbeatInterval)
	}
	if c.SilenceIntervals < 1 {
		return fmt.Errorf("%w: SilenceIntervals %d must be ≥ 1", ErrConfig, c.SilenceIntervals)
	}
	if c.MaxNakRunsPerPump < 1 {
		return fmt.Errorf("%w: MaxNakRunsPerPump %d must be ≥ 1", ErrConfig, c.MaxNakRunsPerPump)
	}
	if c.StartNow && c.Start != 0 {
		return fmt.Errorf("%w: Start %d with StartNow: choose one", ErrConfig, c.Start)
	}
	if c.Start == math.MaxUint64 {
		return fmt.Errorf("%w: Start %d is not a seq", ErrConfig, c.Start)
	}
	if c.StatusInterval <= 0 || c.NakFloor < 0 {
		return fmt.Errorf("%w: StatusInterval %v must be > 0 and NakFloor %v ≥ 0", ErrConfig, c.StatusInterval, c.NakFloor)
	}
	if c.OverrunEvidence < 1 {
		return fmt.Errorf("%w: OverrunEvidence %d must be ≥ 1", ErrConfig, c.OverrunEvidence)
	}
	if c.NakBackoff > 10_000 {
		return fmt.Errorf("%w: NakBackoff %d %% of the RTT is more than 100 RTTs", ErrConfig, c.NakBackoff)
	}
	return nil
}

func validFrame(n int) error {
	if n < minDataFrame || n > MaxDatagram {
		return fmt.Errorf("%w: MaxFrame %d bytes must be in %d..%d", ErrConfig, n, minDataFrame, MaxDatagram)
	}
	return nil
}

func pow2(n int) bool { return n >= 2 && n&(n-1) == 0 }

// slotSize rounds a frame size up to a multiple of 64 bytes.
func slotSize(maxFrame int) int { return (maxFrame + 63) &^ 63 }
