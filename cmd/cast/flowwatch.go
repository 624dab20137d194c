package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
)

// flowWatch is what a sending command learns from its receiver's Status
// frames (the loop's EventReceiver* events and its flow-control table):
// whether the receiver speaks Status at all, how far it delivered, and
// whether it faulted, left or went silent. Its verdict comes first; the
// ICMP-based reach verdict is the fallback for receivers that never send
// Status (reference receivers, filtered paths).
type flowWatch struct {
	l       *cast.Loop
	heard   bool                  // some receiver negotiated
	last    protocol.ReceiverInfo // the receiver as last reported
	bad     cast.EventKind        // EventReceiverFaulted/Lost/Left, 0: none
	timeout time.Duration
}

func newFlowWatch(l *cast.Loop) *flowWatch {
	return &flowWatch{l: l, timeout: time.Duration(protocol.DefaultReceiverTimeout)}
}

// poll takes the loop's pending events and refreshes the receiver's
// position from the loop's flow-control table.
func (w *flowWatch) poll() {
	for {
		select {
		case e := <-w.l.Events():
			w.event(e)
			continue
		default:
		}
		break
	}
	if rs := w.l.Receivers(); len(rs) > 0 {
		w.heard = true
		if rs[0].Delivered >= w.last.Delivered || rs[0].ID != w.last.ID {
			w.last = rs[0]
		}
	}
}

func (w *flowWatch) event(e cast.Event) {
	switch e.Kind {
	case cast.EventReceiverJoined, cast.EventReceiverRestarted:
		w.heard, w.last = true, e.Receiver
		if w.bad != cast.EventReceiverFaulted || e.Kind == cast.EventReceiverRestarted {
			w.bad = 0
		}
	case cast.EventReceiverRecovered:
		w.last, w.bad = e.Receiver, 0
	case cast.EventReceiverFaulted, cast.EventReceiverLost, cast.EventReceiverLeft, cast.EventReceiverStalled:
		w.heard, w.last, w.bad = true, e.Receiver, e.Kind
	}
}

// settle waits after the last record was sent: until the receiver
// reports every seq up to lastSeq delivered when it speaks Status, else
// until no NAK came for quiet; at most max either way.
func (w *flowWatch) settle(ctx context.Context, lastSeq uint64, quiet, max time.Duration) {
	if w.poll(); w.heard {
		w.waitDelivered(ctx, lastSeq, max)
		return
	}
	waitQuiet(ctx, w.l, quiet, max)
}

// waitDelivered returns once the receiver reported every seq up to
// lastSeq delivered, it faulted, left or went silent, ctx ended or max
// passed.
func (w *flowWatch) waitDelivered(ctx context.Context, lastSeq uint64, max time.Duration) {
	end := time.Now().Add(max)
	for ctx.Err() == nil && time.Now().Before(end) {
		w.poll()
		if (w.bad != 0 && w.bad != cast.EventReceiverStalled) || (w.heard && w.last.Delivered >= lastSeq) {
			return // a stalled receiver may still catch up: wait for it
		}
		select {
		case <-w.l.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// verdict is nil when the receiver delivered every record up to lastSeq,
// an outcome error (exit 3) when it faulted, left early or went silent,
// a failure when it is still behind, and ok=false when no receiver ever
// spoke Status (the caller falls back to what ICMP told).
func (w *flowWatch) verdict(lastSeq uint64) (err error, ok bool) {
	w.poll()
	if !w.heard {
		return nil, false
	}
	r := w.last
	got := fmt.Sprintf("it delivered through seq %d of %d", r.Delivered, lastSeq)
	if r.Delivered >= lastSeq && w.bad != cast.EventReceiverFaulted {
		return nil, true // everything arrived; what happened after does not matter
	}
	switch w.bad {
	case cast.EventReceiverFaulted:
		return outcomef("the receiver at %s reported %s: %s", r.Addr, stateText(r.State), got), true
	case cast.EventReceiverLost:
		return outcomef("the receiver at %s went away while records were being sent: no Status for %v; %s", r.Addr, w.timeout, got), true
	case cast.EventReceiverStalled:
		return outcomef("the receiver at %s stopped taking records: it held the sender back for %v without progress; %s", r.Addr, w.timeout, got), true
	case cast.EventReceiverLeft:
		return outcomef("the receiver at %s left while records were being sent: %s", r.Addr, got), true
	}
	return failf("the receiver at %s is still behind after -linger: %s", r.Addr, got), true
}

func stateText(k protocol.OutcomeKind) string {
	return strings.ReplaceAll(k.String(), "-", " ")
}
