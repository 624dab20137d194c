package protocol

// What the Receiver feeds its delay policy (receiver_delay.go): the RTT
// estimate, whether the sender speaks probes, the group size at the last
// NAK decision, the stream position and the highest advertised edge.

// NakDelay is the current first re-NAK delay in ns: adaptive while the
// sender speaks probes, else NakDebounce.
func (r *Receiver) NakDelay() int64 { return r.renakDelay(1) }

// renakDelay is how long a run waits after its rt-th NAK before the next
// on the RTT timer.
func (r *Receiver) renakDelay(rt uint16) int64 {
	return r.loss.delay.timer.delay(r.RTT(), r.peer.probes, r.grp.size, rt)
}

// retryDelay is how long the run starting at start waits after its
// rt-th NAK before the next on the timer: renakDelay, or for the window's
// oldest gap while pinned the shorter pinned delay.
func (r *Receiver) retryDelay(start uint64, rt uint16) int64 {
	d := r.renakDelay(rt)
	if start == r.expected && r.pinned() {
		d = min(d, r.loss.delay.pinned.delay(rt))
	}
	return d
}

// pinned reports whether this unicast receiver holds its sender exactly
// at the highest edge it advertised (pinnedRule).
func (r *Receiver) pinned() bool {
	return r.loss.delay.pinned.pinned(r.rackOn(), r.expected, r.highest, r.st.maxEdge)
}

// rackOn reports whether the order rule (and the pinned one) may judge
// repairs (orderRule.on).
func (r *Receiver) rackOn() bool {
	return r.loss.delay.order.on(r.peer.probes, r.grp.size, r.st.maxEdge, r.highest)
}

// lostByOrder reports whether data the sender sent after answering the
// last NAK of the run in slot i has arrived while its repair has not.
func (r *Receiver) lostByOrder(i uint64) bool {
	return r.rackOn() && r.loss.delay.order.lost(r.loss.gaps[i].edge)
}

// orderSeen feeds data seq, news to the order rule (orderRule.arrived),
// to it: a NAKed run may be due at once when seq shows a repair lost.
func (r *Receiver) orderSeen(seq uint64, now int64) {
	if r.rackOn() && r.loss.delay.order.saw(seq) {
		r.loss.nextDue = min(r.loss.nextDue, now) // a repair sent before seq is lost
	}
}

// shortestRenak is the shortest delay after which this receiver may NAK
// a run again on a timer (Status renak_ns): a unicast receiver's pinned
// delay, else its first re-NAK delay. The sender keeps its dedup window
// below half of it. (An order re-NAK can come sooner; a sender that
// dedups it is asked again once newer data passes the run again.)
func (r *Receiver) shortestRenak() int64 {
	d := r.renakDelay(1)
	if r.peer.probes && r.grp.size <= 1 {
		d = min(d, r.loss.delay.pinned.delay(1))
	}
	return d
}

// backoffLimit is the largest group back-off now, ns (groupBackoff).
func (r *Receiver) backoffLimit() int64 { return r.loss.delay.backoff.bound(r.RTT()) }

// runDue is when the run starting at start (slot i), NAKed rt times, the
// last at at (for rt = 0: when it was found missing, 0 in unicast), may
// be NAKed next: at once for a new run of a receiver alone; after the
// re-NAK delay for a NAKed one (at once when the order rule shows its
// repair lost); in a group plus a back-off drawn for the run and round,
// and never before a NAK heard from another receiver has had time to
// bring the repair.
func (r *Receiver) runDue(start, i uint64, rt uint16, at, now int64) int64 {
	g := r.grp.peers.group(now)
	r.grp.size = g
	due := at
	if rt != 0 {
		// Never twice at one instant, whatever the delay: frames of one
		// datagram cannot spend a run's budget.
		d := r.retryDelay(start, rt)
		if r.lostByOrder(i) {
			d = 0
		}
		due = at + max(d, 1)
	}
	due += r.loss.delay.backoff.delay(start, rt, g, r.RTT())
	return max(due, r.loss.gaps[i].notBefore)
}

// judge says, for a run due now (start, slot i, NAKed rt times, the
// last at at), whether its NAK spends the retry budget, and whether the
// order or the pinned rule made it due (for the counters).
//
// While the sender speaks probes, a re-NAK spends the budget only when
// the sender was heard since the run's last NAK: a sender that a loaded
// machine did not run does not use up the budget of a run it can still
// repair (the silence rule ends a stream whose sender is gone). Nor does
// one made while input waits unread (SetBacklog): the repair may be
// queued in it, behind up to a window of records that a receiver the
// machine did not run has yet to read; it still goes out, but draining a
// deep socket buffer must not spend a whole budget (flow control bounds
// that backlog). An order re-NAK sooner than the timer does not spend
// it either: the budget keeps the timer's pace, so a repair the sender
// serves late (a cold read that newer data overtook) cannot spend it
// faster than before.
func (r *Receiver) judge(start, i uint64, rt uint16, at, now int64) (count, byOrder, byPin bool) {
	if rt == 0 {
		return true, false, false
	}
	count = !r.peer.probes || (r.peer.lastHeard > at && !r.loss.delay.backlog.pending())
	byOrder, byPin = r.lostByOrder(i), start == r.expected && r.pinned()
	if byOrder && now-at < r.retryDelay(start, rt) {
		count = false
	}
	return count, byOrder, byPin
}

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
// with input unread does not spend the run's retry budget (see pump).
func (r *Receiver) SetBacklog(pending bool, now int64) { r.loss.delay.backlog.set(pending, now) }

// heldByBacklog reports whether a group receiver defers its NAK decisions
// now because input waits unread (SetBacklog), counting the deferral.
func (r *Receiver) heldByBacklog(now int64) bool {
	if !r.loss.delay.backlog.holds(r.grp.on, now) {
		return false
	}
	r.stats.BacklogHolds++
	return true
}

// rttSample takes a NAK → retransmit round trip when the record in slot
// i was NAKed exactly once (Karn: a run NAKed twice is ambiguous), once
// per NAK batch.
func (r *Receiver) rttSample(i uint64, now int64) {
	if g := &r.loss.gaps[i]; g.retries == 1 && g.at != r.sampleAt {
		r.sampleAt = g.at
		r.rtt.Sample(now - g.at)
		r.loss.delay.backoff.pathSample(now-g.at, now)
		r.stats.RTTSamples++
		return
	}
	r.groupRTTSample(i, now)
}

// groupSample learns, when a seq this receiver missed (slot i) arrives,
// whether another receiver had NAKed it too.
func (r *Receiver) groupSample(i uint64) {
	g := &r.loss.gaps[i]
	if !r.grp.on || (g.retries == 0 && g.at == 0 && !g.heard) {
		return
	}
	r.loss.delay.backoff.sample(g.heard)
}

// groupRTTSample takes, in a group, an RTT sample when a record arrives
// whose run was NAKed more than once: from the run's first NAK, once per
// first-NAK batch. Karn's rule (no sample from an ambiguous run) keeps
// the unicast estimate clean, but in a group on a loaded host it biases
// the estimate low: the repairs that come before the first re-NAK give
// samples, the slower ones do not, so the re-NAK delay never grows to
// the repair latency and every slow repair is asked for again, by
// multicast, to the whole group. Measured from the first NAK the sample
// is the true round trip when the first repair was merely slow and an
// overestimate when it was lost (rare: the loss rate), which errs on the
// side of fewer NAKs.
func (r *Receiver) groupRTTSample(i uint64, now int64) {
	if !r.grp.on || r.grp.size <= 1 || r.loss.gaps[i].retries < 2 {
		return
	}
	if at := r.loss.gaps[i].first; at != 0 && at != r.sampleAt && now > at {
		r.sampleAt = at
		r.rtt.Sample(now - at)
		r.stats.RTTSamples++
		r.stats.GroupRTTSamples++
	}
}

// SharedLoss is the receiver's estimate (0..1) of how often a seq it
// misses is missed by another receiver of its group too.
func (r *Receiver) SharedLoss() float64 { return float64(r.loss.delay.backoff.shared) / sharedOne }
