package protocol

import (
	"errors"
	"fmt"

	"github.com/walcast/walcast/wire"
)

// OutcomeKind is the state of a Receiver. Every kind but Live is sticky:
// it stays until ResetAfterReplay or Resync.
type OutcomeKind uint8

const (
	// Live: delivering (or waiting for) records.
	Live OutcomeKind = iota
	// Faulted: a gap could not be repaired over UDP (retry budget spent or
	// the sender fell silent with a gap open). Catch up over TCP replay.
	Faulted
	// Reconnect: the sender outran the reorder window: OverrunEvidence
	// datagrams of data ReorderSlots or more ahead of the next expected
	// seq, over at least NakDebounce. Catch up over TCP replay.
	Reconnect
	// SenderRestarted: two heartbeats within the silence time announced a
	// highest seq below the last seq this Receiver delivered. The stream's
	// seqs restarted (or heartbeats were reordered behind later data).
	SenderRestarted
)

func (k OutcomeKind) String() string {
	switch k {
	case Live:
		return "live"
	case Faulted:
		return "faulted"
	case Reconnect:
		return "reconnect"
	case SenderRestarted:
		return "sender-restarted"
	}
	return fmt.Sprintf("OutcomeKind(%d)", uint8(k))
}

// FaultCause says why a Receiver Faulted.
type FaultCause uint8

const (
	// RetryBudget: a missing run was NAKed more than MaxNakRetries times.
	RetryBudget FaultCause = iota + 1
	// Silence: no data and no heartbeat for SilenceIntervals heartbeat
	// intervals while a gap was open.
	Silence
)

// Sentinel errors for the sticky outcomes; see [Outcome.Err].
var (
	ErrFaulted         = errors.New("cast: receiver faulted")
	ErrReconnect       = errors.New("cast: receiver must reconnect")
	ErrSenderRestarted = errors.New("cast: sender restarted")
)

// Outcome is the Receiver's sticky state with the numbers a consumer
// needs to recover.
type Outcome struct {
	Kind OutcomeKind
	// LastDelivered is the last seq handed to the callback (expected − 1).
	LastDelivered uint64
	// GapStart and GapEnd (inclusive) are the missing run that Faulted.
	GapStart, GapEnd uint64
	// Cause is why the receiver Faulted.
	Cause FaultCause
	// Seq is, for Reconnect, the seq of the data record that lay outside
	// the reorder window when the evidence was complete.
	Seq uint64
	// Highest is, for SenderRestarted, the heartbeat's highest_seq.
	Highest uint64
}

// Err returns nil for Live, else an error wrapping ErrFaulted,
// ErrReconnect or ErrSenderRestarted with the outcome's numbers. It
// allocates; call it off the hot path.
func (o Outcome) Err() error {
	switch o.Kind {
	case Faulted:
		cause := "retry budget"
		if o.Cause == Silence {
			cause = "silence"
		}
		return fmt.Errorf("%w (%s): last delivered %d, gap %d..%d", ErrFaulted, cause, o.LastDelivered, o.GapStart, o.GapEnd)
	case Reconnect:
		return fmt.Errorf("%w: last delivered %d, seq %d outside the reorder window", ErrReconnect, o.LastDelivered, o.Seq)
	case SenderRestarted:
		return fmt.Errorf("%w: last delivered %d, sender's highest %d", ErrSenderRestarted, o.LastDelivered, o.Highest)
	}
	return nil
}

// ReceiverStats are the Receiver's counters, totals since NewReceiver.
type ReceiverStats struct {
	Delivered  uint64 // records handed to the callback
	Buffered   uint64 // records stored out of order
	Duplicates uint64 // records already delivered or buffered
	Heartbeats uint64 // valid heartbeats
	Ignored    uint64 // valid frames of type NAK (not for a receiver)
	Bad        BadCounts
	TooLarge   uint64 // out-of-order records larger than a reorder slot
	Dropped    uint64 // frames dropped while a sticky outcome was set
	NaksSent   uint64 // NAK records sent
	NakSeqs    uint64 // seqs requested, summed over NAKs
	NakDropped uint64 // NAKs not sent because the batch was full (retried)
	// NearFaults counts runs NAKed MaxNakRetries times: one more NAK
	// would raise Faulted.
	NearFaults uint64
	MaxRetries uint64 // highest NAK count any run reached
	// NakRounds[k] counts NAKs sent as the k-th NAK of their run (k
	// capped at len−1): NakRounds[B] runs came within one retry of
	// Faulted under a budget of B, NakRounds[B+1] would have faulted.
	NakRounds    [33]uint64
	PeerSilences uint64 // PeerSilent events (silence with no gap open)
	Faults       uint64
	Reconnects   uint64
	Restarts     uint64 // SenderRestarted outcomes
	// Skips counts Skip markers applied: the stream jumped over seqs that
	// have no record (a restarted sender, a repaired log).
	Skips uint64
	// SkipLost counts seqs this Receiver had delivered that a Skip then
	// declared without a record (see SkipNotice).
	SkipLost uint64
	// SkipDiscarded counts records buffered out of order that a Skip
	// dropped: their seqs have no record in the log.
	SkipDiscarded uint64
	// StaleHeartbeats counts heartbeats below the next expected seq but
	// not below the last seq this Receiver delivered itself: sent before a
	// catch-up moved the tip, read after ResetAfterReplay. Ignored.
	StaleHeartbeats uint64

	// Flow control (walcast extension).
	StatusSent uint64 // Status frames sent
	// OrderReNaks counts re-NAKs sent as soon as data the sender sent
	// after the repair arrived without it (the repair was lost), rather
	// than on the re-NAK timer; PinnedReNaks those of the window's
	// oldest gap sent after NakFloor because the sender was held at the
	// advertised edge. Both are counted in NakRounds too.
	OrderReNaks  uint64
	PinnedReNaks uint64
	Probes       uint64 // heartbeats heard in the probe form (counted in Heartbeats too)
	OutOfWindow  uint64 // data frames beyond the reorder window, dropped
	// Lowered counts heartbeats that announced a highest seq below the
	// one believed (a forged or stale announcement corrected).
	Lowered uint64
	// RestartSuspects counts single heartbeats below the last delivered
	// seq (a second within the silence time raises SenderRestarted).
	RestartSuspects uint64
	RTTSamples      uint64 // NAK → retransmit round trips measured
	// Multicast group (NAKs to a control group, receiver_group.go).
	GroupNaks   uint64 // NAKs heard from other receivers
	GroupStatus uint64 // Status frames heard from other receivers
	OwnNaks     uint64 // this receiver's own NAKs looped back by the host
	Suppressed  uint64 // missing seqs whose own NAK a heard NAK held back
	// BacklogHolds counts NAK passes a group receiver deferred because
	// datagrams waited unread (SetBacklog).
	BacklogHolds uint64
	// GroupRTTSamples counts RTT samples a group receiver took from a
	// re-NAKed run, from its first NAK (groupRTTSample).
	GroupRTTSamples uint64
	SessionEnds     uint64 // session end markers heard
	EventsDropped   uint64 // events not queued because 32 were unread (NextEvent)
}

// SkipNotice is the last Skip marker a Receiver applied and what it meant
// for this Receiver: LostFrom…LostTo (0, 0: none) are seqs it had already
// delivered that the marker stands for. With reason wal.SkipRestart their
// content never became durable at the sender and is not in its log: drop
// it. With wal.SkipRepair the log lost its copy; the delivered one is
// authentic.
type SkipNotice struct {
	Skip             wire.Skip
	LostFrom, LostTo uint64
}
