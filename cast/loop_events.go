package cast

import "github.com/walcast/walcast/cast/protocol"

// eventState is what the loop last reported of the Receiver's getters
// and the Sender's log, so that each change is reported once.
type eventState struct {
	kind   protocol.OutcomeKind
	silent bool
	logErr error
	late   uint64
	ended  bool // EventEnded was emitted
}

// checkEvents turns what the cores report into events: the Sender's
// queued flow-control events, and the Receiver's outcome, end, late
// start and silence when they changed since the last call.
func (l *Loop) checkEvents() {
	if l.snd != nil {
		for e, ok := l.snd.NextEvent(); ok; e, ok = l.snd.NextEvent() {
			l.emit(Event{Kind: senderEvents[e.Kind], At: e.At, Receiver: e.Receiver, PrevID: e.PrevID})
		}
	}
	if l.rcv == nil {
		return
	}
	o := l.rcv.Outcome()
	if o.Kind != l.seen.kind {
		l.seen.kind = o.Kind
		switch o.Kind {
		case protocol.Faulted:
			l.emit(Event{Kind: EventFaulted, At: l.now, Outcome: o})
		case protocol.Reconnect:
			l.emit(Event{Kind: EventReconnect, At: l.now, Outcome: o})
		case protocol.SenderRestarted:
			l.emit(Event{Kind: EventSenderRestarted, At: l.now, Outcome: o})
		}
	}
	if final, done := l.rcv.Ended(); done != l.seen.ended {
		l.seen.ended = done
		if done {
			l.emit(Event{Kind: EventEnded, At: l.now, Outcome: o, Seq: final})
		}
	}
	if l.rcv.LateStart() == 0 {
		l.seen.late = 0 // rearmed by Resync or ResetAfterReplay
	}
	if s := l.rcv.PeerSilent(); s != l.seen.silent {
		l.seen.silent = s
		k := EventPeerHeard
		if s {
			k = EventPeerSilent
		}
		l.emit(Event{Kind: k, At: l.now, Outcome: o})
	}
}

// checkLog reports the Sender's log failing and recovering (once per
// change; the error values are the log's own, so this allocates nothing).
func (l *Loop) checkLog() {
	err := l.snd.LogErr()
	switch {
	case err != nil && l.seen.logErr == nil:
		l.emit(Event{Kind: EventLogError, At: l.now, Err: err})
	case err == nil && l.seen.logErr != nil:
		l.emit(Event{Kind: EventLogRecovered, At: l.now})
	}
	l.seen.logErr = err
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
