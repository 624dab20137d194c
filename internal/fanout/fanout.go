package fanout

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/latency"
)

// Mode is how the sender reaches its receivers.
type Mode int

const (
	// Multicast: one sender, one stream, data to a group; NAKs and
	// Status to the control group (group address + 1).
	Multicast Mode = iota
	// Unicast: N casting senders, one per receiver (what fan-out costs
	// without multicast): every record is sent N times.
	Unicast
)

func (m Mode) String() string {
	if m == Unicast {
		return "unicast"
	}
	return "multicast"
}

// Config is one fan-out run.
type Config struct {
	// Receivers is N, 1..15.
	Receivers int
	// Records is how many records the producer sends.
	Records int
	// Payload is the record payload in bytes (≥ 16: seq, send time).
	Payload int
	// Rate is the producer's offered rate in records per second (paced
	// in 1 ms steps); 0 sends as fast as the sender accepts.
	Rate int
	// Loss is the probability (0..1) that a datagram the bridge forwards
	// to a receiver is dropped, drawn independently per receiver (the
	// tc-BPF impair program on the egress of the receiver's bridge port).
	Loss float64
	// Mode is Multicast or Unicast.
	Mode Mode
	// Path is "udp" or "mmsg".
	Path string
	// Group is the data group (multicast mode); port 0 picks one.
	Group netip.AddrPort
	// WAL gives the sender a write-ahead log in a temporary directory
	// (cold repairs, TCP catch-up). Required for Kill.
	WAL bool
	// NakDebounce is the receivers' NAK debounce (0: 5 ms).
	NakDebounce time.Duration
	// ReorderSlots is the receivers' reorder window (0: 8192).
	ReorderSlots int
	// Policy is the sender's group flow policy (multicast), Tagged the
	// receiver ids it waits for with FlowTagged (receiver i has id
	// ReceiverID(i)).
	Policy protocol.FlowPolicy
	Tagged []uint64
	// Kill, when ≥ 0, is the receiver that is killed once it has
	// delivered KillAt records, and restarted after Down, catching up
	// over TCP from the sender's WAL.
	Kill   int
	KillAt int
	Down   time.Duration
	// ReceiverTimeout is how long the sender waits for a silent (or
	// stalled) receiver before it drops it from flow control, and Silence
	// how long a receiver with a gap open waits for a silent sender before
	// it faults (0: 10 s each, not the protocol's 1 s: a loaded machine
	// starves a run's loops for seconds, and Stall ends a stuck run
	// anyway). A Kill run wants the sender to drop the dead receiver
	// within Down: set ReceiverTimeout (the protocol's is 1 s).
	ReceiverTimeout, Silence time.Duration
	// Timeout bounds the whole run (0: 10 minutes).
	Timeout time.Duration
	// Stall ends the run as failed when no receiver delivered anything
	// for this long (0: 20 s).
	Stall time.Duration
}

// DefaultConfig is 8 receivers, 100 000 records of 64 bytes at 50 000
// records/s, 1 % loss, multicast over mmsg, no kill.
func DefaultConfig() Config {
	return Config{
		Receivers: 8, Records: 100_000, Payload: 64, Rate: 50_000, Loss: 0.01,
		Path: "mmsg", Group: netip.MustParseAddrPort("239.198.0.1:0"), Kill: -1,
	}
}

// Validate reports a configuration Run would reject.
func (c Config) Validate() error {
	switch {
	case c.Receivers < 1 || c.Receivers > 15:
		return fmt.Errorf("fanout: Receivers %d outside 1..15", c.Receivers)
	case c.Records < 1:
		return fmt.Errorf("fanout: Records %d < 1", c.Records)
	case c.Payload < 16 || c.Payload > 1400:
		return fmt.Errorf("fanout: Payload %d outside 16..1400", c.Payload)
	case c.Rate < 0:
		return fmt.Errorf("fanout: Rate %d < 0", c.Rate)
	case c.Loss < 0 || c.Loss >= 1:
		return fmt.Errorf("fanout: Loss %v outside [0, 1)", c.Loss)
	case c.Path != "udp" && c.Path != "mmsg":
		return fmt.Errorf("fanout: Path %q: want udp or mmsg", c.Path)
	case c.Mode == Multicast && !c.Group.Addr().IsMulticast():
		return fmt.Errorf("fanout: Group %v is not a multicast address", c.Group)
	case c.Kill >= c.Receivers:
		return fmt.Errorf("fanout: Kill %d outside the %d receivers", c.Kill, c.Receivers)
	case c.Kill >= 0 && c.Mode != Multicast:
		return errors.New("fanout: Kill is a multicast scenario")
	case c.Kill >= 0 && !c.WAL:
		return errors.New("fanout: Kill needs WAL (the restarted receiver catches up over TCP)")
	case c.Kill >= 0 && (c.KillAt < 1 || c.KillAt >= c.Records):
		return fmt.Errorf("fanout: KillAt %d outside 1..Records-1", c.KillAt)
	}
	return nil
}

// ReceiverResult is what one receiver saw.
type ReceiverResult struct {
	Delivered  uint64 // records handed to the application
	OutOfOrder uint64 // deliveries that were not last+1 (must be 0)
	Missing    uint64 // records 1..Records never delivered (must be 0)
	UDP, TCP   uint64 // deliveries by the live stream and by TCP catch-up

	// From the receiver's tap (frames crossing its datapath):
	Lost       uint64 // seqs whose first arrival came after a higher seq, or never (not at the tail)
	Repairs    uint64 // data frames arriving for a seq already seen as missing
	Duplicates uint64 // data frames for a seq already received
	NakFrames  uint64 // NAK frames this receiver sent
	NakSeqs    uint64 // seqs those NAKs asked for
	Status     uint64 // Status frames it sent

	Dropped uint64 // datagrams the BPF injector dropped at its interface

	Latency latency.Summary // send → deliver, one way, ns (loss repairs included)
	// Ended: the receiver heard the session end marker and had every
	// record up to it (not for a receiver killed and restarted: its
	// catch-up ends by count).
	Ended bool
	// Outcome is the receiver's last sticky outcome ("" when live) and
	// Stats its core's counters (of the last incarnation when killed).
	Outcome string
	Stats   protocol.ReceiverStats
	Killed  bool // killed and restarted mid-stream
}

// Result is one run.
type Result struct {
	Config    Config
	Receivers []ReceiverResult
	// SenderDatagrams are the datagrams the sender(s) handed to the
	// kernel (data, retransmits, heartbeats, probes), from the tap.
	SenderDatagrams uint64
	// SenderData are the data frames among them (first transmissions
	// and repairs); Repairs are the data frames for a seq sent before.
	SenderData, Repairs uint64
	// LostEvents is the number of distinct seqs lost by at least one
	// receiver (a record lost at several receivers is one event).
	LostEvents uint64
	// NakFrames are the NAK frames all receivers sent.
	NakFrames uint64
	// Kill runs: LostAfter is the time from the kill to the sender's
	// ReceiverLost event; Stall the longest stretch after the kill in which
	// the producer made less than a tenth of its offered rate (held back
	// by flow control); ResumeRate the producer's rate (records/s) over the
	// 500 ms after it. PreRate is the producer's rate from its first
	// record to the kill and HeldRate its rate from the kill to the
	// ReceiverLost event, so a test compares rates of one run (a loaded
	// machine slows all of them alike). KilledDelivered is what the
	// killed receiver had delivered when it died and ProducedAtLost what
	// the producer had sent when the sender dropped it (with min, at most
	// KilledDelivered plus the receiver's window).
	LostAfter, Stall  time.Duration
	ResumeRate        float64
	PreRate, HeldRate float64
	KilledDelivered   uint64
	ProducedAtLost    int64
	// SenderStats are the sender core's counters (summed in unicast mode).
	SenderStats protocol.SenderStats
	Elapsed     time.Duration
	// Throughput is Records / Elapsed (records/s).
	Throughput float64
	Load       [2][3]float64 // load average before and after
	Notes      []string
}

// ReceiverID is the id receiver i (0-based) of a run uses in its Status,
// for Config.Tagged; a restarted receiver uses ReceiverID(i) + 0x100.
func ReceiverID(i int) uint64 { return 0x5a00 + uint64(i) }

// DatagramsPerRecord is SenderDatagrams / Records.
func (r Result) DatagramsPerRecord() float64 {
	return float64(r.SenderDatagrams) / float64(r.Config.Records)
}

// NaksPerEvent is NakFrames / LostEvents (0 without loss).
func (r Result) NaksPerEvent() float64 {
	if r.LostEvents == 0 {
		return 0
	}
	return float64(r.NakFrames) / float64(r.LostEvents)
}

// RepairsPerLost is Repairs / LostEvents.
func (r Result) RepairsPerLost() float64 {
	if r.LostEvents == 0 {
		return 0
	}
	return float64(r.Repairs) / float64(r.LostEvents)
}
