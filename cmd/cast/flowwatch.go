package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
)

// flowWatch is what a sending command learns from its receivers' Status
// frames (the Producer's EventReceiver* events and its flow-control table):
// whether any receiver speaks Status at all, how far each delivered, and
// whether it faulted, left or went silent. Its verdict comes first; the
// ICMP-based reach verdict is the fallback for receivers that never send
// Status (reference receivers, filtered paths). A multicast group has
// several receivers: each is followed on its own (by its ID) and the
// verdict is the worst of theirs.
type flowWatch struct {
	p       *cast.Producer
	heard   bool                  // some receiver negotiated
	last    protocol.ReceiverInfo // the receiver furthest behind, as last reported
	rcv     map[uint64]*rcvWatch  // by receiver ID
	order   []uint64              // IDs in the order first heard
	timeout time.Duration
}

// rcvWatch is one receiver's last word.
type rcvWatch struct {
	last    protocol.ReceiverInfo
	left    bool // it said it was closing
	lost    bool // it went silent (dropped from flow control)
	stalled bool // it held the sender back without progress
}

func newFlowWatch(p *cast.Producer) *flowWatch {
	return &flowWatch{p: p, rcv: map[uint64]*rcvWatch{}, timeout: protocol.DefaultReceiverTimeout}
}

// get returns receiver info's entry, made on first sight. A new ID from
// an address already known is that receiver restarted: the old entry
// goes.
func (w *flowWatch) get(info protocol.ReceiverInfo) *rcvWatch {
	w.heard = true
	if r, ok := w.rcv[info.ID]; ok {
		return r
	}
	for i := 0; i < len(w.order); i++ {
		if old := w.rcv[w.order[i]]; old.last.Addr == info.Addr {
			delete(w.rcv, w.order[i])
			w.order = append(w.order[:i], w.order[i+1:]...)
			i--
		}
	}
	r := &rcvWatch{last: info}
	w.rcv[info.ID] = r
	w.order = append(w.order, info.ID)
	return r
}

// poll takes the producer's pending events and refreshes the receivers'
// positions from its flow-control table.
func (w *flowWatch) poll() {
	for {
		select {
		case e := <-w.p.Events():
			w.event(e)
			continue
		default:
		}
		break
	}
	w.table(w.p.Receivers())
}

// table takes the flow-control table's rows.
func (w *flowWatch) table(rs []protocol.ReceiverInfo) {
	for _, info := range rs {
		if r := w.get(info); info.Delivered >= r.last.Delivered {
			r.last = info
		}
	}
	w.behind()
}

// behind sets last to the receiver furthest behind.
func (w *flowWatch) behind() {
	for i, id := range w.order {
		if r := w.rcv[id]; i == 0 || r.last.Delivered < w.last.Delivered {
			w.last = r.last
		}
	}
}

// event follows one loop event. A receiver that faults, stalls or goes
// silent may come back (a cast.Consumer catches up over TCP and resumes),
// so only its last word counts.
func (w *flowWatch) event(e cast.Event) {
	var r *rcvWatch
	switch e.Kind {
	case cast.EventReceiverJoined, cast.EventReceiverRestarted, cast.EventReceiverRecovered, cast.EventReceiverFaulted:
		r = w.get(e.Receiver)
		r.lost, r.stalled = false, false
	case cast.EventReceiverStalled:
		r = w.get(e.Receiver)
		r.stalled = true
	case cast.EventReceiverLost:
		r = w.get(e.Receiver)
		r.lost = true
	case cast.EventReceiverLeft:
		r = w.get(e.Receiver)
		r.left = true
	default:
		return
	}
	r.last = e.Receiver
	w.behind()
}

// settle waits after the last record was sent: until every receiver
// reports every seq up to lastSeq delivered (or left) when they speak
// Status, else until no NAK came for quiet; at most max either way.
func (w *flowWatch) settle(ctx context.Context, lastSeq uint64, quiet, max time.Duration) {
	if w.poll(); w.heard {
		w.waitDelivered(ctx, lastSeq, max)
		return
	}
	waitQuiet(ctx, w.p, quiet, max)
}

// waitLeft returns once every receiver heard has said it is leaving, ctx
// ended or max passed. After the end marker (Loop.End) a `cast recv`
// stops and leaves once it delivered up to the final seq; the marker is
// repeated in place of the heartbeat meanwhile, so a receiver that lost
// the first copy (1 % loss loses one in a hundred) still learns where the
// stream ends instead of listening forever after the sender is gone.
func (w *flowWatch) waitLeft(ctx context.Context, max time.Duration) {
	end := time.Now().Add(max)
	for ctx.Err() == nil && time.Now().Before(end) {
		w.poll()
		left := true
		for _, r := range w.rcv {
			left = left && r.left
		}
		if left {
			return
		}
		select {
		case <-w.p.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// done says whether every receiver heard reported every seq up to
// lastSeq delivered or said it is leaving.
func (w *flowWatch) done(lastSeq uint64) bool {
	for _, r := range w.rcv {
		if !r.left && r.last.Delivered < lastSeq {
			return false
		}
	}
	return true
}

// delivered sums what every receiver heard reported delivered: it
// changes whenever one of them makes progress.
func (w *flowWatch) delivered() uint64 {
	var d uint64
	for _, r := range w.rcv {
		d += r.last.Delivered
	}
	return d
}

// waitDelivered returns once done, ctx ended or max passed without
// progress: a slow consumer still draining its backlog keeps the sender
// serving it for as long as its Status shows records delivered. A
// receiver that faulted, stalled or went silent may still catch up: it
// is waited for.
func (w *flowWatch) waitDelivered(ctx context.Context, lastSeq uint64, max time.Duration) {
	end := time.Now().Add(max)
	progress := w.delivered()
	for ctx.Err() == nil && time.Now().Before(end) {
		w.poll()
		if w.done(lastSeq) {
			return
		}
		if d := w.delivered(); d != progress {
			progress, end = d, time.Now().Add(max)
		}
		select {
		case <-w.p.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// verdict is nil when every receiver delivered every record up to
// lastSeq; else, for the first that did not, an outcome error (exit 3)
// with its own word — it reported a sticky outcome, left, went silent or
// stopped taking records — or a failure when it is merely still behind
// after the linger (an outcome anywhere comes before a mere failure). ok
// is false when no receiver ever spoke Status (the caller falls back to
// what ICMP told).
func (w *flowWatch) verdict(lastSeq uint64) (err error, ok bool) {
	w.poll()
	return w.judge(lastSeq)
}

func (w *flowWatch) judge(lastSeq uint64) (err error, ok bool) {
	if !w.heard {
		return nil, false
	}
	var behind error
	for _, id := range w.order {
		switch e := w.rcv[id].judge(lastSeq, w.timeout).(type) {
		case nil:
		case *exitError:
			if e.code == exitOutcome {
				return e, true
			}
			if behind == nil {
				behind = e
			}
		}
	}
	return behind, true
}

// judge is one receiver's verdict (see flowWatch.verdict).
func (r *rcvWatch) judge(lastSeq uint64, timeout time.Duration) error {
	l := r.last
	if l.Delivered >= lastSeq {
		return nil // everything arrived; what happened after does not matter
	}
	got := fmt.Sprintf("it delivered through seq %d of %d", l.Delivered, lastSeq)
	switch {
	case l.State != protocol.Live:
		how := ""
		if r.left {
			how = " and left"
		}
		return outcomef("the receiver at %s reported %s%s: %s", l.Addr, stateText(l.State), how, got)
	case r.left:
		return outcomef("the receiver at %s left while records were being sent: %s", l.Addr, got)
	case r.lost:
		return outcomef("the receiver at %s went away while records were being sent: no Status for %v; %s", l.Addr, timeout, got)
	case r.stalled:
		return outcomef("the receiver at %s stopped taking records: it held the sender back for %v without progress; %s", l.Addr, timeout, got)
	}
	return failf("the receiver at %s is still behind and made no progress for -linger: %s", l.Addr, got)
}

func stateText(k protocol.OutcomeKind) string {
	return strings.ReplaceAll(k.String(), "-", " ")
}
