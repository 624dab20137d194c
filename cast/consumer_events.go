package cast

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// Record is one record delivered to a Consumer's callback. Payload is
// valid only during the call; its first 8 bytes are Seq.
type Record struct {
	Seq     uint64
	Type    uint16
	CRC     uint32 // the payload's CRC-32C, as the frame header carried it (checked)
	Payload []byte
}

// ConsumerEventKind names a consumer event.
type ConsumerEventKind uint8

// Consumer events, in the order a consumer's life shows them.
const (
	// EventSenderFound: the consumer learnt the producer's address
	// (From) from the first valid frame.
	EventSenderFound ConsumerEventKind = iota + 1
	// EventCatchingUp: a TCP catch-up starts at seq From; Bootstrap for
	// the one before going live, else Outcome says what UDP could not
	// repair.
	EventCatchingUp
	// EventCaughtUp: the catch-up delivered From..To (Records records, From
	// > To when there was nothing) in Duration.
	EventCaughtUp
	// EventLive: UDP delivery is live from Tip+1.
	EventLive
	// EventEscalated: the receiver raised a sticky outcome (Outcome);
	// a catch-up or, for a restarted sender, a check of the tip follows.
	EventEscalated
	// EventProducerSilent: no data and no heartbeat for the silence time
	// (10 heartbeat intervals) with no gap open; not sticky.
	// EventProducerHeard: traffic again.
	EventProducerSilent
	EventProducerHeard
	// EventStartedLate: a Receiver with StartNow began delivering at
	// From (the records before it were never asked for).
	EventStartedLate
	// EventSkipped: a Skip marker (Skip set) says the seqs Skip.From …
	// Skip.Seq have no record in the producer's log; the stream continues
	// after it. LostFrom…LostTo (0, 0: none) are the seqs of that range
	// this consumer had already delivered: with reason wal.SkipRestart
	// their content never became durable at the producer — the
	// application must drop what it applied for them. The marker itself
	// reaches deliver in its place (type wal.TypeSkip) right after this
	// event.
	EventSkipped
	// EventStreamEnded: the producer ended the stream (Producer.End, `cast
	// send`: the session end marker) and this consumer has delivered
	// every record up to its final seq, To. Run then returns nil, and the
	// consumer's Leave tells the producer it is done.
	EventStreamEnded
)

var consumerEventNames = [...]string{EventSenderFound: "sender-found", EventCatchingUp: "catching-up",
	EventCaughtUp: "caught-up", EventLive: "live", EventEscalated: "escalated", EventProducerSilent: "producer-silent", EventProducerHeard: "producer-heard", EventSkipped: "skipped", EventStartedLate: "started-late", EventStreamEnded: "ended"}

func (k ConsumerEventKind) String() string {
	if int(k) < len(consumerEventNames) && consumerEventNames[k] != "" {
		return consumerEventNames[k]
	}
	return fmt.Sprintf("ConsumerEventKind(%d)", uint8(k))
}

// ConsumerEvent is one consumer event.
type ConsumerEvent struct {
	Kind      ConsumerEventKind
	Tip       uint64           // last seq delivered when the event happened
	Sender    netip.AddrPort   // EventSenderFound: the producer's address
	Outcome   protocol.Outcome // EventEscalated, EventCatchingUp after one
	Bootstrap bool             // EventCatchingUp, EventCaughtUp: the initial catch-up
	From, To  uint64           // EventCatchingUp (From), EventCaughtUp: seqs delivered; EventStreamEnded (To): the final seq
	Records   uint64           // EventCaughtUp: records the catch-up delivered
	Duration  time.Duration    // EventCaughtUp: escalation (or bootstrap start) to caught up
	Skip      wal.Skip         // EventSkipped
	// LostFrom…LostTo are, for EventSkipped, the seqs this consumer
	// delivered that the Skip stands for (0, 0: none).
	LostFrom, LostTo uint64
}

// ConsumerStats are a [Consumer]'s counters. Exact once Run has returned.
type ConsumerStats struct {
	Tip         uint64 // last seq delivered
	UDPRecords  uint64 // records delivered from the UDP receiver
	TCPRecords  uint64 // records delivered by TCP catch-ups
	Escalations uint64 // sticky outcomes handled
	Faults      uint64 // of which Faulted
	Reconnects  uint64 // of which Reconnect
	CatchUps    uint64 // TCP catch-ups completed (bootstrap included)
	Skips       uint64 // Skip markers applied
	// LostSeqs counts seqs this consumer delivered that a Skip marker then
	// declared without a record (each reported by an EventSkipped).
	LostSeqs uint64
	// StaleRestarts counts SenderRestarted outcomes dismissed because the
	// producer still holds the tip record: a heartbeat from before a
	// catch-up, read after the reset.
	StaleRestarts uint64
	LastRecovery  time.Duration
	Receiver      protocol.ReceiverStats // at most a tick old while Run runs
	Loop          LoopStats
	Replay        replay.ClientStats
}
