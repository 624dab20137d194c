package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// HandleRun is Handle for messages from..to−1 of v, in order: it does
// exactly what a Handle per message would do (same deliveries, NAKs,
// Status, counters and events), with the steady state's per-datagram
// work done once per run of datagrams that each hold one data record,
// the next to deliver, with nothing missing or buffered (inOrderRun).
// Any other datagram goes through Handle. A loop that read a batch
// hands it here (after HoldStatus, as for Handle). It allocates nothing.
func (r *Receiver) HandleRun(v *batch.Vec, from, to int, now int64, out *batch.Vec, deliver func(h wire.Header, payload []byte)) {
	for from < to {
		if k := r.inOrderRun(v, from, to, now, out, deliver); k > 0 {
			from += k
			continue
		}
		d, _ := v.Msg(from)
		r.Handle(d, now, out, deliver)
		from++
	}
}

// inOrderRun delivers messages from, from+1, ... of v while each is one
// data frame whose seq is the next to deliver, and returns how many it
// took (0: the first is not such a datagram, or the Receiver's state
// needs Handle's full path; nothing changed then).
//
// The state that lets a run skip Handle's checks, checked once: the
// stream is live and started, the sender is not silent, no LateStart is
// owed, no session end was seen, and nothing is missing or buffered
// (highest, maxData and the loss detector's dirty mark all below
// expected). Each record of the run keeps that state (it moves expected,
// highest and maxData on together), so Handle's data path would take its
// fresh-and-news branch for every one of them; only the loss detector's
// timer (pump) can change the state, so a run ends after a pump.
func (r *Receiver) inOrderRun(v *batch.Vec, from, to int, now int64, out *batch.Vec, deliver func(h wire.Header, payload []byte)) int {
	if r.out.Kind != Live || r.expected == 0 || r.peer.silent || r.lateOwed || r.end.set || r.end.seen ||
		r.highest != r.expected-1 || r.maxData >= r.expected || r.loss.dirty >= r.expected {
		return 0
	}
	k := from
	for ; k < to; k++ {
		d, _ := v.Msg(k)
		h, p, n, err := wire.DecodeFrame(d)
		if err != nil || n != len(d) || len(p) < 8 || wire.UDPControl(h.Type) || h.Type == wire.TypeSkip {
			break
		}
		seq := le.Uint64(p)
		if seq != r.expected {
			break
		}
		// Handle's per-datagram entry and data's fresh-and-news branch.
		r.lastNow = now
		r.overrun.counted = false
		r.peer.lastHeard, r.peer.clocked, r.peer.heard = now, true, true
		if r.loss.delay.order.arrived(seq, r.st.maxEdge) {
			r.loss.orderSeen(seq, r.peer.probes, r.st.maxEdge, r.highest, now)
		}
		r.maxData = seq
		r.highest = seq
		if r.pinned() {
			r.loss.nextDue = min(r.loss.nextDue, now)
		}
		r.stats.Delivered++
		r.expected++
		r.live = seq
		deliver(h, p)
		if now >= r.loss.nextDue {
			r.pump(now, out)
			k++
			if !r.holdSt {
				r.maybeStatus(now, out)
			}
			break
		}
		if !r.holdSt {
			r.maybeStatus(now, out)
		}
	}
	return k - from
}
