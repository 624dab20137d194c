package protocol

import (
	"math"
	"time"
)

// The re-NAK delay policy: when the loss detector may NAK a missing run
// (again). Five rules, each a small type below with the state it needs;
// delayPolicy holds them and the loss detector (receiver_renak.go) feeds
// them what they judge by (the RTT estimate, whether the sender speaks
// probes, the group size, the stream position).
//
//   - rttTimer: a NAKed run is asked for again after the RTT timeout,
//     doubled per retry (NakDebounce with a reference sender).
//   - orderRule: data the sender sent after the repair arrived without
//     it: the repair was lost, ask at once.
//   - pinnedRule: a sender held exactly at the advertised edge can only
//     be sending repairs: the window's oldest gap is asked for again
//     after NakFloor.
//   - groupBackoff: in a multicast group a NAK waits a random back-off
//     so one receiver's NAK can make the others' unnecessary.
//   - backlogHold: a group receiver makes no NAK decision while its
//     input waits unread.

// delayPolicy is the loss detector's re-NAK delay policy. Invariant:
// it holds no state but its rules', each of which keeps its own.
type delayPolicy struct {
	timer   rttTimer
	order   orderRule
	pinned  pinnedRule
	backoff groupBackoff
	backlog backlogHold
}

func newDelayPolicy(cfg ReceiverConfig, id uint64) delayPolicy {
	debounce := int64(cfg.NakDebounce)
	silence := int64(cfg.HeartbeatInterval) * int64(cfg.SilenceIntervals)
	return delayPolicy{
		timer:   rttTimer{floor: int64(cfg.NakFloor), debounce: debounce, groupCap: max(debounce, silence/4)},
		order:   orderRule{min: math.MaxUint64},
		pinned:  pinnedRule{floor: int64(cfg.NakFloor)},
		backoff: groupBackoff{id: id, pct: int64(max(cfg.NakBackoff, 0)), limit: debounce, shared: sharedOne / 2},
		backlog: backlogHold{limit: debounce},
	}
}

// rttTimer is the re-NAK timer. With a reference sender (no probes) a
// NAKed run waits NakDebounce. While the sender speaks probes it waits
// the RTT timeout (SRTT + 4·RTTVar, at least floor), doubled per retry
// after the first, at most the cap: NakDebounce for a receiver alone; in
// a group (other receivers heard) a quarter of the silence time, at least
// NakDebounce, because there a late repair far more often means a host
// behind than a loss, and every re-NAK and repair goes to every member:
// the delays keep doubling, so a run is asked for about log2(its repair
// latency / RTT) times rather than latency / NakDebounce times.
//
// Invariant: debounce ≤ groupCap, and delay never exceeds limit(group):
// a receiver in a group never waits less than one alone would.
type rttTimer struct {
	floor    int64 // NakFloor
	debounce int64 // NakDebounce: the fixed delay, and the cap alone
	groupCap int64 // the cap in a group
}

// limit is the longest delay for a receiver in a group of size group.
func (t rttTimer) limit(group int) int64 {
	if group <= 1 {
		return t.debounce
	}
	return t.groupCap
}

// delay is how long a run waits after its rt-th NAK (rt ≥ 1) before the
// next.
func (t rttTimer) delay(rtt RTT, probes bool, group int, rt uint16) int64 {
	if !probes {
		return t.debounce
	}
	c := t.limit(group)
	d := rtt.Timeout(t.floor, c)
	if rt > 1 {
		d <<= min(rt-1, 30)
	}
	return min(d, c)
}

// orderRule judges repairs by the order of arrival: a walcast sender
// sends a repair before any data it sends after reading the NAK, and
// never beyond the highest edge the receiver advertised. So once a data
// seq arrives that the sender could only send after answering a run's
// last NAK (beyond the edge advertised then), that run's repair was
// lost. It judges only a unicast receiver whose sender speaks probes
// and honours its edge (nothing known to exist beyond it); a receiver
// its sender released keeps the timers.
//
// Invariants: seen ≤ the highest edge advertised; min ≤ the NAK edge of
// every run awaiting a repair (MaxUint64: none known), so a data seq
// above min may make a run due and one at or below it cannot.
type orderRule struct {
	seen uint64 // highest data seq heard within the advertised edge
	min  uint64 // lowest NAK edge among the runs awaiting a repair (≤)
}

// on reports whether the rule may judge: a unicast receiver (group ≤
// 1) whose sender speaks probes, that advertised an edge, and knows of
// nothing beyond it.
func (orderRule) on(probes bool, group int, edge, highest uint64) bool {
	return probes && group <= 1 && edge != 0 && highest <= edge
}

// arrived reports whether data seq is news to the rule: above what it
// saw and within edge.
func (o *orderRule) arrived(seq, edge uint64) bool { return seq > o.seen && seq <= edge }

// saw notes data seq (arrived was true and the rule is on) and reports
// whether a run awaiting a repair may now be lost.
func (o *orderRule) saw(seq uint64) bool {
	o.seen = seq
	return seq > o.min
}

// lost reports whether the run NAKed last when edge was advertised has
// lost its repair.
func (o *orderRule) lost(nakEdge uint64) bool { return o.seen > nakEdge }

// awaiting notes a run NAKed at nakEdge that awaits its repair.
func (o *orderRule) awaiting(nakEdge uint64) { o.min = min(o.min, nakEdge) }

// reset forgets the runs awaiting repairs (a pass starts over and notes
// them again).
func (o *orderRule) reset() { o.min = math.MaxUint64 }

// unsure notes that runs were left unjudged (a pass stopped early): any
// data seq may make one due.
func (o *orderRule) unsure() { o.min = 0 }

// pinnedRule: a unicast receiver that holds its sender exactly at the
// highest edge it advertised (the sender never lowers an edge, so less
// consumer room since does not stop what is allowed) knows every seq up
// to it exists and none beyond, so nothing but repairs can be in flight
// to it. The window's oldest gap is then asked for again after floor
// (NakFloor), doubled per retry, if that is sooner than the timer.
//
// Invariant: it keeps no state of its own; pinned is false whenever the
// order rule is off (a group, a sender without probes), and delay is at
// least floor, or MaxInt64 (never sooner than the timer) when floor ≤ 0.
type pinnedRule struct {
	floor int64 // NakFloor; ≤ 0: the rule never shortens a delay
}

// pinned reports whether the receiver holds its sender at edge (on:
// the order rule may judge; every seq up to edge is known to exist).
func (pinnedRule) pinned(on bool, expected, highest, edge uint64) bool {
	return on && expected != 0 && highest == edge
}

// delay is the re-NAK delay after the rt-th NAK while pinned.
func (p pinnedRule) delay(rt uint16) int64 {
	d := p.floor
	if d <= 0 {
		return math.MaxInt64
	}
	if rt > 1 {
		d <<= min(rt-1, 30)
	}
	return d
}

// DefaultNakBackoff is the largest NAK back-off in a group, in percent of
// the receiver's smoothed RTT: reached when every loss this receiver sees
// is shared by others; with independent losses the bound shrinks towards
// a sixteenth of it.
const DefaultNakBackoff = 800

// sharedOne is 1.0 in the fixed-point EWMA of shared losses.
const sharedOne = 1 << 16

// groupBackoff is the NAK suppression of a multicast group: a receiver
// that sees a gap waits a back-off drawn per run and round before
// NAKing, so that one receiver's NAK (every member hears it) or the
// repair usually comes before the others' fire. The bound moves between
// pct/32 and pct percent of the path's round trip with shared, how often
// this receiver's losses were NAKed by another receiver too: shared
// losses need room for one NAK to reach the others, independent ones only
// pay the wait. It is at most limit (NakDebounce), and 0 without an RTT
// estimate: the back-off is bounded by a measurement or not taken.
//
// The path's round trip is the smoothed RTT, or the shortest NAK →
// repair round trip this receiver measured lately (path) when that is
// less. On a loaded host the smoothed RTT also carries the time the
// loops were not run (a repair read late, a Status echoed late), which a
// NAK on its way to the other members does not take; a back-off drawn on
// it only postpones this receiver's own NAK, often past its next time
// off the CPU (a NAK due while its loop is not run waits for the next
// run), and so its repair by a whole deschedule.
//
// Invariants: 0 ≤ shared ≤ sharedOne (an EWMA of 0s and sharedOnes);
// path is 0 or the shortest sample since it was last replaced, and a
// sample replaces it once it is pathWindow old.
type groupBackoff struct {
	id     uint64 // this receiver's id: the draws differ between receivers
	pct    int64  // NakBackoff in percent of SRTT (0: no back-off)
	limit  int64  // the largest bound, ns (NakDebounce)
	shared int64  // EWMA (weight 1/8, starts at ½) of shared losses, sharedOne = 1
	path   int64  // shortest NAK → repair round trip lately, ns (0: none)
	pathAt int64  // when path was sampled
}

// pathWindow is how long a shortest round trip stands for the path
// before a new sample replaces it, ns (a route that got slower is
// learnt within it).
const pathWindow = int64(10 * time.Second)

// bound is the largest back-off now, ns.
func (b *groupBackoff) bound(rtt RTT) int64 {
	if b.pct == 0 || !rtt.Valid() {
		return 0
	}
	lo := b.pct / 32
	sh := b.shared
	pct := lo + (b.pct-lo)*sh/sharedOne*sh/sharedOne
	srtt := rtt.SRTT()
	if b.path > 0 {
		srtt = min(srtt, b.path)
	}
	return min(srtt*pct/100, b.limit)
}

// pathSample notes a NAK → repair round trip r (ns) measured at now.
func (b *groupBackoff) pathSample(r, now int64) {
	if b.path == 0 || r <= b.path || now-b.pathAt >= pathWindow {
		b.path, b.pathAt = r, now
	}
}

// delay is the back-off of the run starting at start, round rt, in a
// group of size g (0 when g ≤ 1: a receiver alone NAKs at once).
func (b *groupBackoff) delay(start uint64, rt uint16, g int, rtt RTT) int64 {
	if g <= 1 {
		return 0
	}
	return backoff(b.id, start, rt, g, b.bound(rtt))
}

// sample folds in whether a seq this receiver missed was NAKed by
// another receiver too.
func (b *groupBackoff) sample(shared bool) {
	v := int64(0)
	if shared {
		v = sharedOne
	}
	b.shared += (v - b.shared) / 8
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
// hear it before theirs fire (docs/protocol.md gives the NAKs per shared
// loss the RFC expects and the suite measures). u is a hash of (id,
// start, rt) rather than a generator's next value, so the draw for a run
// is stable however often the pump looks at it, differs between
// receivers, and is deterministic for a given receiver id (tests set
// ReceiverConfig.ID).
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

// backlogHold: while datagrams wait unread (SetBacklog), a group
// receiver makes no NAK decision, for at most limit (NakDebounce): the
// repair it would re-NAK, or another receiver's NAK that would suppress
// its own, may be among them. A unicast receiver is not held; while its
// sender speaks probes a re-NAK made with input unread does not spend
// the run's retry budget.
//
// Invariant: since is 0 exactly when no backlog is reported.
type backlogHold struct {
	since int64 // input waits unread since (0: none; a backlog from time 0 counts from 1)
	limit int64 // longest hold, ns
}

// set records whether input waits unread at now.
func (h *backlogHold) set(pending bool, now int64) {
	switch {
	case !pending:
		h.since = 0
	case h.since == 0:
		h.since = max(now, 1)
	}
}

// holds reports whether a group receiver defers its NAK decisions now.
func (h *backlogHold) holds(group bool, now int64) bool {
	return group && h.since != 0 && now-h.since < h.limit
}

// pending reports whether input waits unread.
func (h *backlogHold) pending() bool { return h.since != 0 }
