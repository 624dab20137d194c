package protocol

import (
	"math"

	"github.com/walcast/walcast/wal"
)

// NAK suppression for receivers of one multicast stream (walcast
// extension, issue 15). In a group every receiver sends its NAKs and
// Status to the control group, so each hears the others'. A receiver that
// sees a gap waits a randomised back-off before NAKing, bounded by its
// measured RTT; a NAK from another receiver for the same seqs, or the
// repair itself, arriving meanwhile makes its own NAK unnecessary. The
// state here is what that needs beside the Receiver's per-seq NAK state:
// which other receivers exist (from their Status and NAK frames) and the
// back-off draw.

// maxPeers is how many other receivers a Receiver remembers; a larger
// group counts as maxPeers+1 (the back-off grows with ln(group), so the
// cap costs little).
const maxPeers = 64

// peerSet remembers the other receivers heard recently, by receiver id.
type peerSet struct {
	id  [maxPeers]uint64
	at  [maxPeers]int64
	n   int
	ttl int64 // forget a peer silent this long, ns
}

// heard notes receiver id (nonzero) heard at now.
func (p *peerSet) heard(id uint64, now int64) {
	oldest := 0
	for i := range p.n {
		if p.id[i] == id {
			p.at[i] = now
			return
		}
		if p.at[i] < p.at[oldest] {
			oldest = i
		}
	}
	if p.n < maxPeers {
		p.id[p.n], p.at[p.n] = id, now
		p.n++
		return
	}
	p.id[oldest], p.at[oldest] = id, now // full: the longest silent one goes
}

// group is the group size estimate: this receiver plus the others heard
// within ttl.
func (p *peerSet) group(now int64) int {
	g := 1
	for i := range p.n {
		if now-p.at[i] < p.ttl {
			g++
		}
	}
	return g
}

// backoff is the delay in ns before the NAK of a run first missing at
// start, round rt (0 = the first NAK), for a receiver with id, in a group
// of size g, bounded by limit (ns). With g = 1 it is 0: a receiver alone
// NAKs at once, exactly as in unicast.
//
// The draw is the truncated exponential of RFC 5401 §3.3 (NORM's
// feedback suppression, after Nonnenmacher and Biersack), which Aeron's
// OptimalMulticastDelayGenerator also uses: x = (T/λ)·ln(1 + u·(e^λ − 1))
// with λ = ln(g) + 1 and u uniform in [0, 1). It puts most timers late
// and few early, so the first NAK usually goes out alone and the others
// hear it before theirs fire: with T = K RTTs the RFC expects
// exp(1.2·λ/(2K)) NAKs per loss shared by the whole group (1.26 for
// g = 8, K = 8; measured 1.2 in TestGroupSharedLoss). u is a hash of (id, start, rt) rather than
// a generator's next value, so the draw for a run is stable however often
// the pump looks at it, differs between receivers, and is deterministic
// for a given receiver id (tests set ReceiverConfig.ID).
func backoff(id, start uint64, rt uint16, g int, limit int64) int64 {
	if g <= 1 || limit <= 0 {
		return 0
	}
	u := float64(mix64(id^mix64(start)^uint64(rt)<<56)>>11) / (1 << 53)
	lambda := math.Log(float64(g)) + 1
	x := float64(limit) / lambda * math.Log1p(u*math.Expm1(lambda))
	return min(int64(x), limit)
}

// mix64 is SplitMix64's finaliser: a bijective 64-bit mix.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// DefaultNakBackoff is the largest NAK back-off in a group, in percent of
// the receiver's smoothed RTT: reached when every loss this receiver sees
// is shared by others; with independent losses the bound shrinks towards
// a sixteenth of it.
const DefaultNakBackoff = 800

// sharedOne is 1.0 in the fixed-point EWMA of shared losses.
const sharedOne = 1 << 16

// groupState is a Receiver's part in a multicast group: the other
// receivers it hears, and per seq the time before which a NAK heard from
// another receiver keeps its own NAK back.
type groupState struct {
	peers        peerSet
	notBefore    []int64 // per reorder slot: own NAK not before this (0: free)
	heard        []bool  // per reorder slot: another receiver NAKed this missing seq
	pct          int64   // NakBackoff in percent of SRTT (0: no back-off)
	on           bool    // NAKs go to a multicast address: a group's control group
	firstAt      []int64 // per reorder slot: when the run's first NAK went out (groupRTTSample)
	backlogSince int64   // SetBacklog: input waits unread since (0: none)
	size         int     // the group size at the last NAK decision (renakCap)
	// shared is an EWMA (weight 1/8, sharedOne = 1; it starts at ½) of whether a seq this
	// receiver missed was NAKed by another receiver too: how correlated
	// the group's losses are, as seen from here.
	shared int64
}

func (g *groupState) init(cfg ReceiverConfig) {
	g.notBefore = make([]int64, cfg.ReorderSlots)
	g.heard = make([]bool, cfg.ReorderSlots)
	if g.on = cfg.Sender.Addr().IsMulticast(); g.on {
		g.firstAt = make([]int64, cfg.ReorderSlots)
	}
	g.shared = sharedOne / 2
	g.peers.ttl = cfg.HeartbeatInterval * int64(cfg.SilenceIntervals)
	g.pct = int64(max(cfg.NakBackoff, 0)) // cfg has its defaults: 0 is off
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
func (r *Receiver) SetBacklog(pending bool, now int64) {
	switch {
	case !pending:
		r.grp.backlogSince = 0
	case r.grp.backlogSince == 0:
		r.grp.backlogSince = max(now, 1)
	}
}

// heldByBacklog reports whether a group receiver defers its NAK decisions
// now because input waits unread (SetBacklog), counting the deferral.
func (r *Receiver) heldByBacklog(now int64) bool {
	if !r.grp.on || r.grp.backlogSince == 0 || now-r.grp.backlogSince >= r.debounce {
		return false
	}
	r.stats.BacklogHolds++
	return true
}

// GroupSize is the receiver's estimate of its group: itself plus the
// other receivers whose Status or NAKs it heard within the silence time.
// 1 means it is alone (unicast, or the only receiver): it then NAKs at
// once, exactly as in unicast.
func (r *Receiver) GroupSize(now int64) int { return r.grp.peers.group(now) }

// backoffLimit is the largest back-off now, ns: a fraction of the
// smoothed RTT (its own NAK → repair estimate, else the sender's from the
// probes), at most NakDebounce. The fraction moves between NakBackoff/16
// and NakBackoff percent with how often this receiver's losses were
// shared by others: shared losses need room for one NAK to reach the
// others before theirs fire; independent ones only pay the wait. Without
// any RTT estimate it is 0: the back-off is bounded by a measurement or
// not taken.
func (r *Receiver) backoffLimit() int64 {
	rtt := r.RTT()
	if r.grp.pct == 0 || !rtt.Valid() {
		return 0
	}
	lo := r.grp.pct / 32
	sh := r.grp.shared
	pct := lo + (r.grp.pct-lo)*sh/sharedOne*sh/sharedOne
	return min(rtt.SRTT()*pct/100, r.debounce)
}

// groupSample learns, when a seq this receiver missed (slot i) arrives,
// whether another receiver had NAKed it too.
func (r *Receiver) groupSample(i uint64) {
	if !r.grp.on || (r.loss.gaps[i].retries == 0 && r.loss.gaps[i].at == 0 && !r.loss.gaps[i].heard) {
		return
	}
	v := int64(0)
	if r.loss.gaps[i].heard {
		v = sharedOne
	}
	r.grp.shared += (v - r.grp.shared) / 8
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
func (r *Receiver) SharedLoss() float64 { return float64(r.grp.shared) / sharedOne }

// runDue is when the run starting at start (slot i), NAKed rt times, the
// last at at (for rt = 0: when it was found missing, 0 in unicast), may
// be NAKed next: at once for a new run of a receiver alone; after the
// re-NAK delay for a NAKed one; in a group plus a back-off drawn for the
// run and round, and never before a NAK heard from another receiver has
// had time to bring the repair.
func (r *Receiver) runDue(start, i uint64, rt uint16, at, now int64) int64 {
	g := r.grp.peers.group(now)
	r.grp.size = g
	due := at
	if rt != 0 {
		// Never twice at one instant, whatever the delay: frames of one
		// datagram cannot spend a run's budget.
		d := r.retryDelay(start, rt)
		if r.lostByOrder(i) {
			d = 0 // data sent after the repair came, the repair did not
		}
		due = at + max(d, 1)
	}
	if g > 1 {
		due += backoff(r.id, start, rt, g, r.backoffLimit())
	}
	return max(due, r.loss.gaps[i].notBefore)
}

// heardNak handles a NAK another receiver sent to the group: the seqs it
// asks for that this receiver also misses need no NAK of its own until
// the repair has had time to come (one re-NAK delay). A NAK carrying
// this receiver's own id is its own, looped back by the host.
func (r *Receiver) heardNak(p []byte, now int64) {
	nak, err := wal.ParseNak(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	id := le.Uint64(p[16:])
	if id == r.id {
		r.stats.OwnNaks++
		return
	}
	r.stats.GroupNaks++
	if id != 0 {
		r.grp.peers.heard(id, now)
	}
	if r.expected == 0 || nak.Count == 0 || nak.From > r.highest {
		return
	}
	from := max(nak.From, r.expected)
	to := r.highest
	if nak.Count-1 < to-nak.From { // no overflow: Count ≥ 1
		to = nak.From + nak.Count - 1
	}
	if edge := r.expected + r.window - 1; to > edge {
		to = edge
	}
	for seq := from; seq <= to && seq >= from; seq++ {
		i := seq & r.mask
		if r.ring.has(seq) {
			continue
		}
		r.loss.gaps[i].heard = true
		nb := now + max(r.renakDelay(max(r.loss.gaps[i].retries, 1)), 1)
		if nb > r.loss.gaps[i].notBefore {
			r.loss.gaps[i].notBefore = nb
			r.stats.Suppressed++
		}
	}
}

// heardStatus notes the receiver of another receiver's Status (a group
// member).
func (r *Receiver) heardStatus(p []byte, now int64) {
	st, err := ParseStatus(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	if st.ReceiverID != r.id {
		r.stats.GroupStatus++
		r.grp.peers.heard(st.ReceiverID, now)
	}
}

// putNak writes the NAK frame for from … to into buf. In a group (NAKs
// to a multicast address), once the sender speaks probes (a walcast
// sender: negotiated), the NAK's padding carries this receiver's id at
// payload offset 16, so the other receivers count it and this one
// recognises its own NAK when the host loops it back; otherwise it is
// the reference's bytes exactly.
func (r *Receiver) putNak(buf []byte, from, to uint64) int {
	n := wal.PutNakFrame(buf, wal.Nak{From: from, Count: to - from + 1})
	if r.fcPeer && r.grp.on {
		le.PutUint64(buf[wal.HeaderSize+16:], r.id)
		_ = wal.Seal(buf[:n], wal.TypeNak)
	}
	return n
}
