package protocol

// The loss detector's judgments: what it feeds its delay policy
// (receiver_delay.go) — the RTT estimate, whether the sender speaks
// probes, the group size at the last NAK decision, the stream position
// and the highest advertised edge — and the round trips it measures.

// renakDelay is how long a run waits after its rt-th NAK before the next
// on the RTT timer.
func (l *lossDetector) renakDelay(rtt RTT, probes bool, rt uint16) int64 {
	return l.delay.timer.delay(rtt, probes, l.size, rt)
}

// retryDelay is how long the run starting at start waits after its
// rt-th NAK before the next on the timer: renakDelay, or for the window's
// oldest gap while pinned the shorter pinned delay.
func (l *lossDetector) retryDelay(in *lossInput, start uint64, rt uint16) int64 {
	d := l.renakDelay(l.roundTrip(in.peer), in.peer.probes, rt)
	if start == in.expected && l.pinned(in.peer.probes, in.expected, in.highest, in.edge) {
		d = min(d, l.delay.pinned.delay(rt))
	}
	return d
}

// pinned reports whether this unicast receiver holds its sender exactly
// at the highest edge it advertised (pinnedRule).
func (l *lossDetector) pinned(probes bool, expected, highest, edge uint64) bool {
	return l.delay.pinned.pinned(l.rackOn(probes, edge, highest), expected, highest, edge)
}

// rackOn reports whether the order rule (and the pinned one) may judge
// repairs (orderRule.on).
func (l *lossDetector) rackOn(probes bool, edge, highest uint64) bool {
	return l.delay.order.on(probes, l.size, edge, highest)
}

// lostByOrder reports whether data the sender sent after answering the
// last NAK of the run in slot i has arrived while its repair has not.
func (l *lossDetector) lostByOrder(in *lossInput, i uint64) bool {
	return l.rackOn(in.peer.probes, in.edge, in.highest) && l.delay.order.lost(l.gaps[i].edge)
}

// orderSeen feeds data seq, news to the order rule (orderRule.arrived),
// to it: a NAKed run may be due at once when seq shows a repair lost.
func (l *lossDetector) orderSeen(seq uint64, probes bool, edge, highest uint64, now int64) {
	if l.rackOn(probes, edge, highest) && l.delay.order.saw(seq) {
		l.nextDue = min(l.nextDue, now) // a repair sent before seq is lost
	}
}

// shortestRenak is the shortest delay after which this receiver may NAK
// a run again on a timer (Status renak_ns): a unicast receiver's pinned
// delay, else its first re-NAK delay. The sender keeps its dedup window
// below half of it. (An order re-NAK can come sooner; a sender that
// dedups it is asked again once newer data passes the run again.)
func (l *lossDetector) shortestRenak(rtt RTT, probes bool) int64 {
	d := l.renakDelay(rtt, probes, 1)
	if probes && l.size <= 1 {
		d = min(d, l.delay.pinned.delay(1))
	}
	return d
}

// runDue is when the run starting at start (slot i), NAKed rt times, the
// last at at (for rt = 0: when it was found missing, 0 in unicast), may
// be NAKed next: at once for a new run of a receiver alone; after the
// re-NAK delay for a NAKed one (at once when the order rule shows its
// repair lost); in a group plus a back-off drawn for the run and round,
// and never before a NAK heard from another receiver has had time to
// bring the repair.
func (l *lossDetector) runDue(in *lossInput, start, i uint64, rt uint16, at, now int64) int64 {
	g := in.peers.group(now)
	l.size = g
	due := at
	if rt != 0 {
		// Never twice at one instant, whatever the delay: frames of one
		// datagram cannot spend a run's budget.
		d := l.retryDelay(in, start, rt)
		if l.lostByOrder(in, i) {
			d = 0
		}
		due = at + max(d, 1)
	}
	due += l.delay.backoff.delay(start, rt, g, l.roundTrip(in.peer))
	return max(due, l.gaps[i].notBefore)
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
func (l *lossDetector) judge(in *lossInput, start, i uint64, rt uint16, at, now int64) (count, byOrder, byPin bool) {
	if rt == 0 {
		return true, false, false
	}
	count = !in.peer.probes || (in.peer.lastHeard > at && !l.delay.backlog.pending())
	byOrder, byPin = l.lostByOrder(in, i), start == in.expected && l.pinned(in.peer.probes, in.expected, in.highest, in.edge)
	if byOrder && now-at < l.retryDelay(in, start, rt) {
		count = false
	}
	return count, byOrder, byPin
}

// heldByBacklog reports whether a group receiver defers its NAK decisions
// now because input waits unread (SetBacklog), counting the deferral.
func (l *lossDetector) heldByBacklog(now int64) bool {
	if !l.delay.backlog.holds(l.group, now) {
		return false
	}
	l.stats.BacklogHolds++
	return true
}

// rttSample takes a NAK → retransmit round trip when the record in slot
// i was NAKed exactly once (Karn: a run NAKed twice is ambiguous), once
// per NAK batch.
func (l *lossDetector) rttSample(i uint64, now int64) {
	if g := &l.gaps[i]; g.retries == 1 && g.at != l.sampleAt {
		l.sampleAt = g.at
		l.rtt.Sample(now - g.at)
		l.delay.backoff.pathSample(now-g.at, now)
		l.stats.RTTSamples++
		return
	}
	l.groupRTTSample(i, now)
}

// groupSample learns, when a seq this receiver missed (slot i) arrives,
// whether another receiver had NAKed it too.
func (l *lossDetector) groupSample(i uint64) {
	g := &l.gaps[i]
	if !l.group || (g.retries == 0 && g.at == 0 && !g.heard) {
		return
	}
	l.delay.backoff.sample(g.heard)
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
func (l *lossDetector) groupRTTSample(i uint64, now int64) {
	if !l.group || l.size <= 1 || l.gaps[i].retries < 2 {
		return
	}
	if at := l.gaps[i].first; at != 0 && at != l.sampleAt && now > at {
		l.sampleAt = at
		l.rtt.Sample(now - at)
		l.stats.RTTSamples++
		l.stats.GroupRTTSamples++
	}
}
