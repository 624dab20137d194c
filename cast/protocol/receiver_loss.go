package protocol

import (
	"math"
	"net/netip"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// lossDetector holds the NAK state of the seqs missing from the window
// (ReorderSlots seqs from the next expected one), one gap per seq mod
// ReorderSlots, and the time the next NAK pass is due. Its pass (pump)
// walks the missing seqs in runs and asks the re-NAK delay policy
// (receiver_delay.go) when each run is due; nak stamps a run with its
// new NAK history. It also measures its own NAK → repair round trip from
// that history (rtt). What it judges by that other parts of the Receiver
// own comes in as a lossInput.
//
// Invariants: gaps[seq&mask] describes seq only while seq is missing
// and inside the window; delivering a seq, or a Skip declaring it
// without a record, zeroes its gap; a seq that arrives out of order
// keeps only its group fields (heard, notBefore) until it is delivered.
// A run is a maximal stretch of missing seqs with equal retries, at and
// notBefore, so all its seqs were NAKed together. nextDue is at or
// before the time any run becomes due (noDue: none open). size is the
// group size taken at the last NAK decision (runDue, first).
type lossDetector struct {
	gaps    []gap
	mask    uint64      // ReorderSlots − 1
	window  uint64      // ReorderSlots
	nextDue int64       // earliest time a run may be NAKed (noDue: none)
	delay   delayPolicy // when each run is due

	group bool // NAKs go to a multicast group (the sender address is one)
	size  int  // group size at the last NAK decision

	rtt      RTT   // own NAK → repair estimate
	sampleAt int64 // gap.at of the last RTT sample (one sample per NAK batch)

	// dirty is the highest seq whose gap was ever written (nak, first,
	// heard: every write is of a seq in expected … highest at the time).
	// A seq above it that is the next to deliver has a zero gap: the one
	// other seq of its slot that could have been written is a window
	// below, was delivered or skipped, and that zeroed it. So the
	// Receiver need not read or zero the slot: in-order data touches no
	// gap (a cache line per record saved) until a loss.
	dirty uint64

	maxRuns    int            // MaxNakRunsPerPump
	maxRetries int            // MaxNakRetries
	dest       netip.AddrPort // where NAKs go (ReceiverConfig.Sender)
	id         uint64         // this receiver's id (group NAKs carry it)
	stats      *ReceiverStats // the counters it adds to
}

// gap is the NAK history of one missing seq.
//
// Invariant, while its seq is missing: spent ≤ retries (only the NAKs
// the budget counts spend); retries = 0 means no NAK went out yet, and
// then at is when a group receiver found the seq missing (0 alone);
// first, notBefore and heard are set only in a group.
type gap struct {
	at        int64  // last NAK; in a group, for a seq not yet NAKed: when it was found missing
	first     int64  // group: when the seq's first NAK went out (groupRTTSample)
	notBefore int64  // group: no own NAK before this, another receiver's NAK is bringing the repair (0: free)
	edge      uint64 // the highest advertised edge when it was last NAKed (order rule)
	retries   uint16 // NAKs sent for it, 0: never
	spent     uint16 // of those, the NAKs its retry budget counts
	heard     bool   // group: another receiver NAKed it
}

// lossInput is what the loss detector judges by that the rest of the
// Receiver owns, as of the call: the stream position, the highest edge
// its Status advertised, what it knows of the sender (whether it speaks
// probes, when it was last heard, its RTT estimate), and which seqs are
// not missing (buffered, or in a pending Skip's hole).
type lossInput struct {
	expected uint64 // next seq to deliver (0: not synced)
	highest  uint64 // highest seq known to exist
	edge     uint64 // highest edge advertised (statusReporter.maxEdge)
	peer     *senderView
	ring     *reorderRing
	hole     *skipHole
	peers    *peerSet // the other receivers of a group (the group size)
	live     bool     // no sticky outcome is set
}

const noDue = math.MaxInt64

func newLossDetector(cfg ReceiverConfig, id uint64, stats *ReceiverStats) lossDetector {
	return lossDetector{
		gaps:       make([]gap, cfg.ReorderSlots),
		mask:       uint64(cfg.ReorderSlots - 1),
		window:     uint64(cfg.ReorderSlots),
		nextDue:    noDue,
		delay:      newDelayPolicy(cfg, id),
		group:      cfg.Sender.Addr().IsMulticast(),
		maxRuns:    cfg.MaxNakRunsPerPump,
		maxRetries: cfg.MaxNakRetries,
		dest:       cfg.Sender,
		id:         id,
		stats:      stats,
	}
}

// found notes that the seq of slot i arrived out of order: its NAK
// history ends (the group fields stay until it is delivered).
func (l *lossDetector) found(i uint64) { l.gaps[i].at, l.gaps[i].retries = 0, 0 }

// clear zeroes slot i: its seq was delivered or has no record.
func (l *lossDetector) clear(i uint64) { l.gaps[i] = gap{} }

// gapOpen reports whether a seq known to exist has not been delivered.
// expected itself is then always missing (it would have been delivered).
func gapOpen(expected, highest uint64) bool { return expected != 0 && highest >= expected }

// pump walks the window expected … min(highest, expected+window−1) and
// NAKs each missing run that the delay policy says is due (at most
// MaxNakRunsPerPump). A run is a maximal stretch of missing seqs with the
// same NAK history, so a run that was split by a late arrival keeps its
// retry count and delay, and newly missing seqs next to it get their
// own first NAK. When a NAK spends the last of a run's retry budget it
// stops and returns that run: the Receiver raises Faulted. A pass that
// starts while a sticky outcome is set stops after its first NAK.
func (l *lossDetector) pump(in *lossInput, now int64, out *batch.Vec) (from, to uint64, faulted bool) {
	if l.heldByBacklog(now) {
		return 0, 0, false // nextDue stays due: the pump runs once the input is read
	}
	l.nextDue = noDue
	l.delay.order.reset()
	if !gapOpen(in.expected, in.highest) {
		return 0, 0, false
	}
	upper := in.highest
	if upper-in.expected >= l.window {
		upper = in.expected + l.window - 1
	}
	runs := 0
	for seq := in.expected; ; {
		start, end, ok := l.nextRun(seq, upper, in.ring, in.hole)
		if !ok {
			return 0, 0, false
		}
		seq = end + 1
		i := start & l.mask
		g := &l.gaps[i]
		rt, at := g.retries, g.at
		if due := l.runDue(in, start, i, rt, at, now); now < due {
			l.nextDue = min(l.nextDue, due)
			if rt != 0 {
				l.delay.order.awaiting(g.edge)
			}
			continue
		}
		count, byOrder, byPin := l.judge(in, start, i, rt, at, now)
		sent, spent := false, false
		if runs != l.maxRuns {
			sent, spent = l.nak(in, start, end, rt, count, now, out)
		}
		if !sent {
			l.nextDue = now // more to do on the next Tick
			l.delay.order.unsure()
			return 0, 0, false
		}
		if byOrder {
			l.stats.OrderReNaks++
		} else if byPin {
			l.stats.PinnedReNaks++
		}
		runs++
		if spent || !in.live {
			return start, end, spent
		}
	}
}

// nextRun finds the first missing run at or after seq, up to upper:
// start … end. A seq the ring holds is not missing; a pending Skip's
// hole has no record and is never part of a run.
func (l *lossDetector) nextRun(seq, upper uint64, ring *reorderRing, hole *skipHole) (start, end uint64, ok bool) {
	for seq <= upper {
		if seq == hole.from && hole.holds(seq) {
			seq = hole.to + 1
			continue
		}
		if ring.has(seq) {
			seq++
			continue
		}
		g := &l.gaps[seq&l.mask]
		start = seq
		for seq++; seq <= upper && seq != hole.from; seq++ {
			h := &l.gaps[seq&l.mask]
			if ring.has(seq) || h.retries != g.retries || h.at != g.at || h.notBefore != g.notBefore {
				break
			}
		}
		return start, seq - 1, true
	}
	return 0, 0, false
}

// nak appends NAK{from, to−from+1} to out and stamps the run's seqs
// with their new retry count (and, when count, the NAKs the budget
// counts). sent is false when out is full; spent is true when the
// counted NAKs exceed the budget (the caller raises Faulted).
func (l *lossDetector) nak(in *lossInput, from, to uint64, rt uint16, count bool, now int64, out *batch.Vec) (sent, spent bool) {
	buf := out.Next()
	if len(buf) < wire.ControlFrameSize {
		l.stats.NakDropped++
		if l.nextDue > now {
			l.nextDue = now
		}
		return false, false
	}
	n := l.putNak(buf, from, to, in.peer.probes)
	out.Commit(n, l.dest)
	var sp uint16
	if rt != 0 {
		sp = l.gaps[from&l.mask].spent
	}
	rt++
	if count {
		sp++
	}
	first := rt == 1 && l.group
	l.dirty = max(l.dirty, to)
	for seq := from; seq <= to; seq++ {
		i := seq & l.mask
		l.gaps[i].retries = rt
		l.gaps[i].spent = sp
		l.gaps[i].at = now
		l.gaps[i].edge = in.edge
		l.gaps[i].notBefore = 0
		if first {
			l.gaps[i].first = now
		}
	}
	l.delay.order.awaiting(in.edge)
	st := l.stats
	st.NaksSent++
	st.NakSeqs += to - from + 1
	st.NakRounds[min(int(rt), len(st.NakRounds)-1)]++
	if uint64(rt) > st.MaxRetries {
		st.MaxRetries = uint64(rt)
	}
	if count && int(sp) == l.maxRetries {
		st.NearFaults++
	}
	if int(sp) > l.maxRetries {
		return true, true
	}
	if due := now + l.retryDelay(in, from, rt); due < l.nextDue {
		l.nextDue = due
	}
	return true, false
}

// first asks for seqs from … to, just found missing: at once when the
// receiver is alone; in a group after a back-off (the pump sends it when
// due, unless a NAK heard from another receiver or the repair comes
// first). Their NAK history starts now. spent is nak's.
func (l *lossDetector) first(in *lossInput, from, to uint64, now int64, out *batch.Vec) (spent bool) {
	g := in.peers.group(now)
	l.size = g
	if g <= 1 {
		_, spent = l.nak(in, from, to, 0, true, now, out)
		return spent
	}
	l.dirty = max(l.dirty, to)
	for seq := from; seq <= to; seq++ {
		i := seq & l.mask
		l.gaps[i].at, l.gaps[i].retries, l.gaps[i].notBefore = now, 0, 0
	}
	if due := now + l.delay.backoff.delay(from, 0, g, l.roundTrip(in.peer)); due < l.nextDue {
		l.nextDue = due
	}
	return false
}

// putNak writes the NAK frame for from … to into buf. In a group (NAKs
// to a multicast address), once the sender speaks probes (a walcast
// sender: negotiated), the NAK's padding carries this receiver's id at
// payload offset 16, so the other receivers count it and this one
// recognises its own NAK when the host loops it back; otherwise it is
// the reference's bytes exactly.
func (l *lossDetector) putNak(buf []byte, from, to uint64, probes bool) int {
	n := wire.PutNakFrame(buf, wire.Nak{From: from, Count: to - from + 1})
	if probes && l.group {
		le.PutUint64(buf[wire.HeaderSize+16:], l.id)
		_ = wire.Seal(buf[:n], wire.TypeNak)
	}
	return n
}

// roundTrip is the Receiver's RTT (Receiver.RTT) given what it heard
// from its sender (peer): its own NAK → repair estimate, or the larger
// of it and the sender's probe estimate. It reads the group size of the
// last NAK decision, so a pass reads it anew after each.
func (l *lossDetector) roundTrip(peer *senderView) RTT {
	if l.group && l.size > 1 && l.rtt.samples >= groupOwnSamples {
		return l.rtt
	}
	return RTT{srtt: max(l.rtt.srtt, peer.srtt), rttvar: max(l.rtt.rttvar, peer.rttvar), samples: l.rtt.samples}
}

// groupOwnSamples is how many NAK → repair round trips of its own a
// group receiver measures before its own estimate alone times its NAKs
// (an RFC 6298 estimator has settled after a few).
const groupOwnSamples = 8

// heard applies a NAK another receiver sent for from … to (clamped to
// the window by the caller): the seqs of it that this receiver also
// misses need no NAK of its own until the repair has had time to come
// (one re-NAK delay).
func (l *lossDetector) heard(from, to uint64, ring *reorderRing, rtt RTT, probes bool, now int64) {
	l.dirty = max(l.dirty, to)
	for seq := from; seq <= to && seq >= from; seq++ {
		i := seq & l.mask
		if ring.has(seq) {
			continue
		}
		l.gaps[i].heard = true
		nb := now + max(l.renakDelay(rtt, probes, max(l.gaps[i].retries, 1)), 1)
		if nb > l.gaps[i].notBefore {
			l.gaps[i].notBefore = nb
			l.stats.Suppressed++
		}
	}
}
