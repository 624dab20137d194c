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
	left    bool                  // it said it was closing
	lost    bool                  // it went silent (dropped from flow control)
	stalled bool                  // it held the sender back without progress
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

// event follows one loop event. A receiver that faults, stalls or goes
// silent may come back (a cast.Consumer catches up over TCP and resumes),
// so only the last word counts.
func (w *flowWatch) event(e cast.Event) {
	switch e.Kind {
	case cast.EventReceiverJoined, cast.EventReceiverRestarted, cast.EventReceiverRecovered, cast.EventReceiverFaulted:
		w.heard, w.last, w.lost, w.stalled = true, e.Receiver, false, false
	case cast.EventReceiverStalled:
		w.heard, w.last, w.stalled = true, e.Receiver, true
	case cast.EventReceiverLost:
		w.heard, w.last, w.lost = true, e.Receiver, true
	case cast.EventReceiverLeft:
		w.heard, w.last, w.left = true, e.Receiver, true
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
// lastSeq delivered or said it is leaving, ctx ended or max passed. A
// receiver that faulted, stalled or went silent may still catch up: it is
// waited for.
func (w *flowWatch) waitDelivered(ctx context.Context, lastSeq uint64, max time.Duration) {
	end := time.Now().Add(max)
	for ctx.Err() == nil && time.Now().Before(end) {
		w.poll()
		if w.left || w.last.Delivered >= lastSeq {
			return
		}
		select {
		case <-w.l.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// verdict is nil when the receiver delivered every record up to lastSeq;
// else an outcome error (exit 3) with the receiver's own word — it
// reported a sticky outcome, left, went silent or stopped taking records
// — or a failure when it is merely still behind after the linger. ok is
// false when no receiver ever spoke Status (the caller falls back to
// what ICMP told).
func (w *flowWatch) verdict(lastSeq uint64) (err error, ok bool) {
	w.poll()
	if !w.heard {
		return nil, false
	}
	r := w.last
	if r.Delivered >= lastSeq {
		return nil, true // everything arrived; what happened after does not matter
	}
	got := fmt.Sprintf("it delivered through seq %d of %d", r.Delivered, lastSeq)
	switch {
	case r.State != protocol.Live:
		how := ""
		if w.left {
			how = " and left"
		}
		return outcomef("the receiver at %s reported %s%s: %s", r.Addr, stateText(r.State), how, got), true
	case w.left:
		return outcomef("the receiver at %s left while records were being sent: %s", r.Addr, got), true
	case w.lost:
		return outcomef("the receiver at %s went away while records were being sent: no Status for %v; %s", r.Addr, w.timeout, got), true
	case w.stalled:
		return outcomef("the receiver at %s stopped taking records: it held the sender back for %v without progress; %s", r.Addr, w.timeout, got), true
	}
	return failf("the receiver at %s is still behind after -linger: %s", r.Addr, got), true
}

func stateText(k protocol.OutcomeKind) string {
	return strings.ReplaceAll(k.String(), "-", " ")
}
