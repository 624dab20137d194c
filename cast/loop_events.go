package cast

import "github.com/walcast/walcast/cast/protocol"

// receiverEvents maps the Receiver's events to event kinds; an
// OutcomeSet event takes its kind from the outcome (outcomeEvents).
var receiverEvents = [...]EventKind{protocol.PeerSilent: EventPeerSilent, protocol.PeerHeard: EventPeerHeard,
	protocol.LateStart: EventLateStart, protocol.SkipApplied: EventSkip, protocol.StreamEnded: EventEnded}

var outcomeEvents = [...]EventKind{protocol.Faulted: EventFaulted, protocol.Reconnect: EventReconnect,
	protocol.SenderRestarted: EventSenderRestarted}

// checkEvents drains the cores' event queues into events: the Sender's
// flow-control and log-health events and the Receiver's state changes. The deliver
// callback drains the Receiver's queue too, so that an event queued
// before a record (a late start, a Skip marker) reaches the application
// before that record.
func (l *Loop) checkEvents() {
	if l.snd != nil && l.snd.Events() > 0 {
		for e, ok := l.snd.NextEvent(); ok; e, ok = l.snd.NextEvent() {
			l.emit(Event{Kind: senderEvents[e.Kind], At: e.At, Receiver: e.Receiver, PrevID: e.PrevID, Err: e.Err})
		}
	}
	if l.rcv != nil && l.rcv.Events() > 0 {
		l.receiverEvents()
	}
}

// receiverEvents emits the Receiver's queued events.
func (l *Loop) receiverEvents() {
	for e, ok := l.rcv.NextEvent(); ok; e, ok = l.rcv.NextEvent() {
		var k EventKind
		switch {
		case e.Kind == protocol.OutcomeSet && int(e.Outcome.Kind) < len(outcomeEvents):
			k = outcomeEvents[e.Outcome.Kind]
		case int(e.Kind) < len(receiverEvents):
			k = receiverEvents[e.Kind]
		}
		if k == 0 {
			continue // a kind this loop does not report
		}
		l.emit(Event{Kind: k, At: e.At, Outcome: e.Outcome, Seq: e.Seq, Skip: e.Skip})
	}
}

func (l *Loop) emit(e Event) {
	l.noteEvent(&e)
	if l.cfg.OnEvent != nil {
		l.cfg.OnEvent(e)
	}
	select {
	case l.events <- e:
	default:
	}
}
