package protocol

import "github.com/walcast/walcast/batch"

// The Receiver's side of NAKing: it hands the loss detector
// (receiver_loss.go) what the other parts own and raises Faulted when a
// run's retry budget is spent.

// lossIn is the loss detector's view of the rest of the Receiver now.
func (r *Receiver) lossIn() lossInput {
	return lossInput{
		expected: r.expected,
		highest:  r.highest,
		edge:     r.st.maxEdge,
		peer:     &r.peer,
		ring:     &r.ring,
		hole:     &r.hole,
		peers:    &r.peers,
		live:     r.out.Kind == Live,
	}
}

// pump runs the loss detector's NAK pass.
func (r *Receiver) pump(now int64, out *batch.Vec) {
	in := r.lossIn()
	if from, to, spent := r.loss.pump(&in, now, out); spent {
		r.retryFault(from, to, now)
	}
}

// firstNak asks for seqs from … to, just found missing (lossDetector.first).
func (r *Receiver) firstNak(from, to uint64, now int64, out *batch.Vec) {
	in := r.lossIn()
	if r.loss.first(&in, from, to, now, out) {
		r.retryFault(from, to, now)
	}
}

// retryFault raises Faulted: the NAK of from … to exceeded its retry
// budget.
func (r *Receiver) retryFault(from, to uint64, now int64) {
	r.stats.Faults++
	r.setOutcome(Outcome{Kind: Faulted, Cause: RetryBudget, LastDelivered: r.expected - 1, GapStart: from, GapEnd: to}, now)
}

// NakDelay is the current first re-NAK delay in ns: adaptive while the
// sender speaks probes, else NakDebounce.
func (r *Receiver) NakDelay() int64 { return r.renakDelay(1) }

// renakDelay is how long a run waits after its rt-th NAK before the next
// on the RTT timer.
func (r *Receiver) renakDelay(rt uint16) int64 { return r.loss.renakDelay(r.RTT(), r.peer.probes, rt) }

// shortestRenak is the shortest re-NAK delay a Status announces
// (lossDetector.shortestRenak).
func (r *Receiver) shortestRenak() int64 { return r.loss.shortestRenak(r.RTT(), r.peer.probes) }

// pinned reports whether this unicast receiver holds its sender exactly
// at the highest edge it advertised (pinnedRule).
func (r *Receiver) pinned() bool {
	return r.loss.pinned(r.peer.probes, r.expected, r.highest, r.st.maxEdge)
}

// rackOn reports whether the order rule (and the pinned one) may judge
// repairs (orderRule.on).
func (r *Receiver) rackOn() bool { return r.loss.rackOn(r.peer.probes, r.st.maxEdge, r.highest) }

// backoffLimit is the largest group back-off now, ns (groupBackoff).
func (r *Receiver) backoffLimit() int64 { return r.loss.delay.backoff.bound(r.RTT()) }

// SetBacklog tells the Receiver whether more datagrams wait to be handled
// than the caller is about to hand it (its last receive filled the
// batch): a loop calls it before each batch. In a group (NAKs to a
// multicast address) the Receiver then makes no NAK decision until it has
// caught up with its input, for at most NakDebounce: the repair it would
// re-NAK, or another receiver's NAK that would suppress its own, may be
// among the datagrams not read yet. A receiver a loaded machine did not
// run for a while would otherwise NAK, on waking, everything whose timer
// expired meanwhile, repairs already queued for it included, and every
// such NAK goes to the whole group. Unicast receivers keep the
// reference's NAK timing; while their sender speaks probes, a re-NAK made
// with input unread does not spend the run's retry budget (see judge).
func (r *Receiver) SetBacklog(pending bool, now int64) { r.loss.delay.backlog.set(pending, now) }

// SharedLoss is the receiver's estimate (0..1) of how often a seq it
// misses is missed by another receiver of its group too.
func (r *Receiver) SharedLoss() float64 { return float64(r.loss.delay.backoff.shared) / sharedOne }
