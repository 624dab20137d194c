package cast

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/walcast/walcast/cast/protocol"
)

// EventKind says what an [Event] reports. One set serves a [Loop]
// (LoopConfig.OnEvent, Loop.Events) and a [Consumer]
// (ConsumerConfig.OnEvent): a situation has one kind, whichever reports
// it. String is the kind's name; `cast recv -json` prints the kinds it
// reports under that name (see its -h).
type EventKind uint8

// Receiver side: a Loop with a Receiver, and a Consumer.
const (
	// EventFaulted: the Receiver Faulted: a gap UDP could not repair
	// (sticky; Event.Outcome). A Consumer that catches up handles it
	// (Event.Handled): EventCatchingUp follows.
	EventFaulted EventKind = iota + 1
	// EventReconnect: the Receiver must reconnect: the stream ran a
	// reorder window or more ahead (sticky; Event.Outcome). A Consumer
	// handles it as EventFaulted.
	EventReconnect
	// EventSenderRestarted: the sender's seqs went back below what was
	// delivered (sticky; Event.Outcome). A Consumer that catches up
	// handles it (Event.Handled) by asking the replay server for its tip
	// record: the same record (a stale heartbeat): EventLive follows;
	// another, Run returns ErrSenderBehind.
	EventSenderRestarted
	// EventPeerSilent: no data and no heartbeat from the sender for the
	// Receiver's silence time with no gap open; not sticky.
	EventPeerSilent
	// EventPeerHeard: traffic again after EventPeerSilent.
	EventPeerHeard
	// EventError: the loop stopped on a datapath error (Event.Err).
	EventError
	// EventSkip: a Skip marker (Event.Skip) says the seqs Skip.From …
	// Skip.Seq have no record in the sender's log; the stream continues
	// after it. Skip.LostFrom…LostTo (0, 0: none) are the seqs of that
	// range already delivered: with reason wire.SkipRestart their content
	// never became durable at the sender, and the application must drop
	// what it applied for them. The marker itself (type wire.TypeSkip) is
	// delivered right after this event.
	EventSkip
	// EventLogError: the Sender's log cannot make records durable
	// (Event.Err: a full disk, an I/O error, a stalled flush); heartbeats
	// are withheld until EventLogRecovered.
	EventLogError
	// EventLogRecovered: the Sender's log makes progress again.
	EventLogRecovered
	// EventLateStart: a StartNow Receiver began delivering at Event.Seq,
	// after seq 1 (the seqs below it exist and are not delivered). It
	// comes before that record.
	EventLateStart

	// Sender side: flow control. Event.Receiver is the receiver as the
	// Sender last heard it (id, address, delivered seq, state).

	// EventReceiverJoined: a receiver's first Status: flow control is on
	// for it.
	EventReceiverJoined
	// EventReceiverRestarted: a new receiver id from a known address
	// replaced the old one (Event.PrevID).
	EventReceiverRestarted
	// EventReceiverLost: a receiver silent for ReceiverTimeout was
	// dropped from flow control.
	EventReceiverLost
	// EventReceiverLeft: a receiver said it is closing.
	EventReceiverLeft
	// EventReceiverFaulted: a receiver reported a sticky outcome
	// (Event.Receiver.State).
	EventReceiverFaulted
	// EventReceiverRecovered: live (or progressing) again after
	// EventReceiverFaulted or EventReceiverStalled.
	EventReceiverRecovered
	// EventReceiverStalled: a receiver held the sender back for
	// ReceiverTimeout without progress and was released.
	EventReceiverStalled

	// EventEnded: the sender ended the stream (the session end marker:
	// Producer.End, Loop.End, `cast send`) and every record up to its
	// final seq (Event.Seq) was delivered. A Consumer's Run then returns
	// nil, and its Leave tells the producer it is done.
	EventEnded

	// A Consumer's own events, in the order its life shows them.

	// EventSenderFound: the consumer learnt the producer's address
	// (Event.Sender) from the first valid frame.
	EventSenderFound
	// EventCatchingUp: a TCP catch-up starts at seq Event.From;
	// Event.Bootstrap for the one before going live, else Event.Outcome
	// says what UDP could not repair.
	EventCatchingUp
	// EventCaughtUp: the catch-up delivered Event.From … Event.To
	// (Event.Records records; From > To when there was nothing) in
	// Event.Duration.
	EventCaughtUp
	// EventLive: UDP delivery is live from Event.Tip+1.
	EventLive

	// EventKeyUnknown: a keyed Loop refused a datagram tagged with a key
	// id it does not hold (Event.Err names it; Event.Sender is the
	// source): a mismatched key file. Reported once per key id.
	EventKeyUnknown
	// EventColdTooLarge: a record the log returned for a retransmit
	// (Event.Seq) is larger than the loop's datagrams and was skipped: a
	// log written with a larger MaxFrame, or without keys by a producer
	// now keyed with an explicit Slot. Event.Err gives the sizes.
	// Reported once per Loop; LoopStats.ColdTooLarge counts them all.
	EventColdTooLarge
)

var eventNames = [...]string{EventFaulted: "faulted", EventReconnect: "reconnect", EventSenderRestarted: "sender_restarted",
	EventPeerSilent: "peer_silent", EventPeerHeard: "peer_heard", EventError: "error", EventSkip: "skip",
	EventLogError: "log_error", EventLogRecovered: "log_recovered", EventLateStart: "late_start",
	EventReceiverJoined: "receiver_joined", EventReceiverRestarted: "receiver_restarted", EventReceiverLost: "receiver_lost",
	EventReceiverLeft: "receiver_left", EventReceiverFaulted: "receiver_faulted", EventReceiverRecovered: "receiver_recovered",
	EventReceiverStalled: "receiver_stalled", EventEnded: "ended",
	EventSenderFound: "sender_found", EventCatchingUp: "catching_up", EventCaughtUp: "caught_up", EventLive: "live",
	EventKeyUnknown: "key_unknown", EventColdTooLarge: "cold_too_large"}

// String is the kind's name: the "event" field of the `cast recv -json`
// lines that report the kind. It does not change.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is something the application should know about. Kind says which
// of the other fields are set.
type Event struct {
	Kind EventKind
	// At is the loop's clock (ns, Loop.Now) when it happened; 0 for a
	// Consumer's events outside its loop (the bootstrap catch-up).
	At int64
	// Tip is, for a Consumer's events, the last seq delivered when the
	// event happened.
	Tip uint64
	// Seq is, for EventLateStart, the first seq delivered; for EventEnded,
	// the stream's final seq.
	Seq     uint64
	Outcome protocol.Outcome // the Receiver's outcome at the time; EventCatchingUp: the one UDP could not repair
	// Handled is set on a Consumer's EventFaulted, EventReconnect and
	// EventSenderRestarted when the Consumer deals with the outcome (a
	// catch-up, or a check of its tip, follows); clear, the outcome ends
	// Run (NoCatchUp).
	Handled bool
	Err     error               // EventError, EventLogError
	Skip    protocol.SkipNotice // EventSkip
	// Receiver is, for the EventReceiver* kinds, the receiver as the
	// Sender last heard it. PrevID is the id EventReceiverRestarted
	// replaced.
	Receiver protocol.ReceiverInfo
	PrevID   uint64
	// Sender is, for EventSenderFound, the producer's address.
	Sender netip.AddrPort
	// Bootstrap marks the catch-up before going live (EventCatchingUp,
	// EventCaughtUp).
	Bootstrap bool
	// From and To are the seqs a catch-up starts at (EventCatchingUp) and
	// delivered (EventCaughtUp); Records how many records it delivered
	// and Duration the time from the escalation (or the bootstrap's
	// start) to caught up.
	From, To uint64
	Records  uint64
	Duration time.Duration
}

// senderEvents maps the Sender's flow-control events to event kinds.
var senderEvents = [...]EventKind{protocol.ReceiverJoined: EventReceiverJoined, protocol.ReceiverRestarted: EventReceiverRestarted,
	protocol.ReceiverLost: EventReceiverLost, protocol.ReceiverLeft: EventReceiverLeft,
	protocol.ReceiverFaulted: EventReceiverFaulted, protocol.ReceiverRecovered: EventReceiverRecovered,
	protocol.ReceiverStalled: EventReceiverStalled, protocol.LogError: EventLogError, protocol.LogRecovered: EventLogRecovered}
