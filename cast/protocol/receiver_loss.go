package protocol

import (
	"math"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// lossDetector holds the NAK state of the seqs missing from the window
// (ReorderSlots seqs from the next expected one), one gap per seq mod
// ReorderSlots, and the time the next NAK pass is due. The pump walks
// the missing seqs in runs and asks the re-NAK delay policy
// (receiver_delay.go) when each run is due; sendNak stamps a run with
// its new NAK history.
//
// Invariants: gaps[seq&mask] describes seq only while seq is missing
// and inside the window; delivering a seq, or a Skip declaring it
// without a record, zeroes its gap; a seq that arrives out of order
// keeps only its group fields (heard, notBefore) until it is delivered.
// A run is a maximal stretch of missing seqs with equal retries, at and
// notBefore, so all its seqs were NAKed together. nextDue is at or
// before the time any run becomes due (noDue: none open).
type lossDetector struct {
	gaps    []gap
	nextDue int64       // earliest time a run may be NAKed (noDue: none)
	delay   delayPolicy // when each run is due
}

// gap is the NAK history of one missing seq.
type gap struct {
	at        int64  // last NAK; in a group, for a seq not yet NAKed: when it was found missing
	first     int64  // group: when the seq's first NAK went out (groupRTTSample)
	notBefore int64  // group: no own NAK before this, another receiver's NAK is bringing the repair (0: free)
	edge      uint64 // the highest advertised edge when it was last NAKed (order rule)
	retries   uint16 // NAKs sent for it, 0: never
	spent     uint16 // of those, the NAKs its retry budget counts
	heard     bool   // group: another receiver NAKed it
}

const noDue = math.MaxInt64

func newLossDetector(cfg ReceiverConfig, id uint64) lossDetector {
	return lossDetector{gaps: make([]gap, cfg.ReorderSlots), nextDue: noDue, delay: newDelayPolicy(cfg, id)}
}

// found notes that the seq of slot i arrived out of order: its NAK
// history ends (the group fields stay until it is delivered).
func (l *lossDetector) found(i uint64) { l.gaps[i].at, l.gaps[i].retries = 0, 0 }

// clear zeroes slot i: its seq was delivered or has no record.
func (l *lossDetector) clear(i uint64) { l.gaps[i] = gap{} }

// gapOpen reports whether a seq known to exist has not been delivered.
// expected itself is then always missing (it would have been delivered).
func (r *Receiver) gapOpen() bool { return r.expected != 0 && r.highest >= r.expected }

// pump walks the window expected … min(highest, expected+window−1) and
// NAKs each missing run that the delay policy says is due (at most
// MaxNakRunsPerPump). A run is a maximal stretch of missing seqs with the
// same NAK history, so a run that was split by a late arrival keeps its
// retry count and delay, and newly missing seqs next to it get their
// own first NAK.
func (r *Receiver) pump(now int64, out *batch.Vec) {
	if r.heldByBacklog(now) {
		return // nextDue stays due: the pump runs once the input is read
	}
	r.loss.nextDue = noDue
	r.loss.delay.order.reset()
	if !r.gapOpen() {
		return
	}
	upper := r.highest
	if upper-r.expected >= r.window {
		upper = r.expected + r.window - 1
	}
	runs := 0
	for seq := r.expected; ; {
		start, end, ok := r.nextRun(seq, upper)
		if !ok {
			return
		}
		seq = end + 1
		i := start & r.mask
		g := &r.loss.gaps[i]
		rt, at := g.retries, g.at
		if due := r.runDue(start, i, rt, at, now); now < due {
			r.loss.nextDue = min(r.loss.nextDue, due)
			if rt != 0 {
				r.loss.delay.order.awaiting(g.edge)
			}
			continue
		}
		count, byOrder, byPin := r.judge(start, i, rt, at, now)
		if runs == r.cfg.MaxNakRunsPerPump || !r.sendNak(start, end, rt, count, now, out) {
			r.loss.nextDue = now // more to do on the next Tick
			r.loss.delay.order.unsure()
			return
		}
		if byOrder {
			r.stats.OrderReNaks++
		} else if byPin {
			r.stats.PinnedReNaks++
		}
		runs++
		if r.out.Kind != Live {
			return
		}
	}
}

// nextRun finds the first missing run at or after seq, up to upper:
// start … end. A pending Skip's hole has no record and is never part of
// a run.
func (r *Receiver) nextRun(seq, upper uint64) (start, end uint64, ok bool) {
	for seq <= upper {
		if seq == r.hole.from && seq != 0 && r.hole.to >= seq {
			seq = r.hole.to + 1
			continue
		}
		if r.ring.has(seq) {
			seq++
			continue
		}
		g := &r.loss.gaps[seq&r.mask]
		start = seq
		for seq++; seq <= upper && seq != r.hole.from; seq++ {
			h := &r.loss.gaps[seq&r.mask]
			if r.ring.has(seq) || h.retries != g.retries || h.at != g.at || h.notBefore != g.notBefore {
				break
			}
		}
		return start, seq - 1, true
	}
	return 0, 0, false
}

// sendNak appends NAK{from, to−from+1} to out and stamps the run's seqs
// with their new retry count (and, when count, the NAKs the budget
// counts). It raises Faulted when the counted NAKs exceed the budget. It
// returns false when out is full.
func (r *Receiver) sendNak(from, to uint64, rt uint16, count bool, now int64, out *batch.Vec) bool {
	buf := out.Next()
	if len(buf) < wire.ControlFrameSize {
		r.stats.NakDropped++
		if r.loss.nextDue > now {
			r.loss.nextDue = now
		}
		return false
	}
	n := r.putNak(buf, from, to)
	out.Commit(n, r.cfg.Sender)
	var sp uint16
	if rt != 0 {
		sp = r.loss.gaps[from&r.mask].spent
	}
	rt++
	if count {
		sp++
	}
	first := rt == 1 && r.grp.on
	for seq := from; seq <= to; seq++ {
		i := seq & r.mask
		r.loss.gaps[i].retries = rt
		r.loss.gaps[i].spent = sp
		r.loss.gaps[i].at = now
		r.loss.gaps[i].edge = r.st.maxEdge
		r.loss.gaps[i].notBefore = 0
		if first {
			r.loss.gaps[i].first = now
		}
	}
	r.loss.delay.order.awaiting(r.st.maxEdge)
	r.stats.NaksSent++
	r.stats.NakSeqs += to - from + 1
	r.stats.NakRounds[min(int(rt), len(r.stats.NakRounds)-1)]++
	if uint64(rt) > r.stats.MaxRetries {
		r.stats.MaxRetries = uint64(rt)
	}
	if count && int(sp) == r.cfg.MaxNakRetries {
		r.stats.NearFaults++
	}
	if int(sp) > r.cfg.MaxNakRetries {
		r.stats.Faults++
		r.setOutcome(Outcome{Kind: Faulted, Cause: RetryBudget, LastDelivered: r.expected - 1, GapStart: from, GapEnd: to}, now)
		return true
	}
	if due := now + r.retryDelay(from, rt); due < r.loss.nextDue {
		r.loss.nextDue = due
	}
	return true
}

// firstNak asks for seqs from … to, just found missing: at once when the
// receiver is alone; in a group after a back-off (the pump sends it when
// due, unless a NAK heard from another receiver or the repair comes
// first). Their NAK history starts now.
func (r *Receiver) firstNak(from, to uint64, now int64, out *batch.Vec) {
	g := r.grp.peers.group(now)
	r.grp.size = g
	if g <= 1 {
		r.sendNak(from, to, 0, true, now, out)
		return
	}
	for seq := from; seq <= to; seq++ {
		i := seq & r.mask
		r.loss.gaps[i].at, r.loss.gaps[i].retries, r.loss.gaps[i].notBefore = now, 0, 0
	}
	if due := now + r.loss.delay.backoff.delay(from, 0, g, r.RTT()); due < r.loss.nextDue {
		r.loss.nextDue = due
	}
}
