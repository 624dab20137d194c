package protocol

import "fmt"

// ReceiverEventKind says what a [ReceiverEvent] reports.
type ReceiverEventKind uint8

// Receiver events: changes in the Receiver's state that its loop
// reports to the application. Each is queued once, when it happens.
const (
	// OutcomeSet: a sticky outcome was set; Event.Outcome.Kind is
	// Faulted, Reconnect or SenderRestarted. ResetAfterReplay and Resync
	// clear it without an event.
	OutcomeSet ReceiverEventKind = iota + 1
	// PeerSilent: the sender has been silent for the silence time with no
	// gap open (PeerSilent reports true).
	PeerSilent
	// PeerHeard: PeerSilent cleared, by traffic or by ResetAfterReplay or
	// Resync.
	PeerHeard
	// LateStart: a StartNow Receiver begins delivering at Event.Seq,
	// after seq 1 (seqs below it exist and are not delivered). Queued
	// before that record reaches the deliver callback.
	LateStart
	// SkipApplied: a Skip marker was applied (Event.Skip, as LastSkip).
	// Queued before the marker reaches the deliver callback.
	SkipApplied
	// StreamEnded: the sender ended the stream (session end marker) and
	// every record up to its final seq (Event.Seq) was delivered.
	StreamEnded
)

var receiverEventNames = [...]string{OutcomeSet: "outcome", PeerSilent: "peer_silent", PeerHeard: "peer_heard",
	LateStart: "late_start", SkipApplied: "skip", StreamEnded: "ended"}

func (k ReceiverEventKind) String() string {
	if int(k) < len(receiverEventNames) && receiverEventNames[k] != "" {
		return receiverEventNames[k]
	}
	return fmt.Sprintf("ReceiverEventKind(%d)", uint8(k))
}

// ReceiverEvent is one change in the Receiver's state.
type ReceiverEvent struct {
	Kind    ReceiverEventKind
	At      int64      // receiver clock, ns (the now of the call that raised it)
	Outcome Outcome    // the outcome when it was queued
	Seq     uint64     // LateStart: first seq delivered; StreamEnded: final seq
	Skip    SkipNotice // SkipApplied: the marker and what it meant here
}

// NextEvent returns the oldest unread event. The loop drains it after
// Handle, Tick, ResetAfterReplay and Resync; it is the one method the
// deliver callback may call, so that LateStart and SkipApplied are read
// before the record they precede. At most 32 wait, the last slot kept
// for OutcomeSet, which is never dropped (the others beyond 31 are
// counted in ReceiverStats.EventsDropped). It allocates nothing.
func (r *Receiver) NextEvent() (ReceiverEvent, bool) { return r.events.pop() }

// Events is the number of unread events: a loop checks it before it
// calls NextEvent, on every delivered record.
func (r *Receiver) Events() int { return r.events.n }

// event queues an event of kind k at now with the current outcome. The
// queue's last slot is kept for OutcomeSet: a sticky outcome stops the
// Receiver until its loop handles it, and a loop that learns of it from
// the queue alone would wait forever for a dropped one.
func (r *Receiver) event(k ReceiverEventKind, now int64, seq uint64, sk SkipNotice) {
	reserve := 1
	if k == OutcomeSet {
		reserve = 0
	}
	if !r.events.push(ReceiverEvent{Kind: k, At: now, Outcome: r.out, Seq: seq, Skip: sk}, reserve) {
		r.stats.EventsDropped++
	}
}

// setOutcome sets the sticky outcome o and queues its event.
func (r *Receiver) setOutcome(o Outcome, now int64) {
	r.out = o
	r.event(OutcomeSet, now, 0, SkipNotice{})
}

// lateDelivery queues LateStart before the first record of a late start
// is delivered.
func (r *Receiver) lateDelivery(now int64) {
	if r.lateOwed {
		r.lateOwed = false
		r.event(LateStart, now, r.late, SkipNotice{})
	}
}

// noteEnded queues StreamEnded when Ended turns true.
func (r *Receiver) noteEnded(now int64) {
	if final, done := r.Ended(); done != r.end.seen {
		r.end.seen = done
		if done {
			r.event(StreamEnded, now, final, SkipNotice{})
		}
	}
}
