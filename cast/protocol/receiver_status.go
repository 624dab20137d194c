package protocol

import (
	"math"

	"github.com/walcast/walcast/batch"
)

// statusState is what the Receiver last told its sender, and what it
// owes it.
type statusState struct {
	lastAt    int64 // when the last Status went out; never: none yet
	delivered uint64
	highest   uint64
	window    uint64
	state     OutcomeKind
	serial    uint32

	echoTS uint64 // probe ts to echo in the next Status (0: none)
	echoAt int64  // when that probe was heard
}

// ID is the receiver id carried in Status.
func (r *Receiver) ID() uint64 { return r.id }

// RTT returns the receiver's view of the round trip: the larger of its
// own NAK → retransmit estimate (which includes the sender's repair time,
// e.g. a cold read) and the sender's probe estimate (which keeps it right
// when Karn's rule starves its own: a run whose RTT grew past the re-NAK
// delay is NAKed twice and gives no sample). Samples counts its own.
func (r *Receiver) RTT() RTT {
	return RTT{srtt: max(r.rtt.srtt, r.peerSRTT), rttvar: max(r.rtt.rttvar, r.peerVar), samples: r.rtt.samples}
}

// SpeaksProbes reports whether the sender's last heartbeat was a probe:
// it has heard this receiver's Status and honours its window.
func (r *Receiver) SpeaksProbes() bool { return r.fcPeer }

// NakDelay is the current first re-NAK delay in ns: adaptive while the
// sender speaks probes, else NakDebounce.
func (r *Receiver) NakDelay() int64 { return r.renakDelay(1) }

// renakDelay is how long a run waits after its rt-th NAK before the next.
func (r *Receiver) renakDelay(rt uint16) int64 {
	if !r.fcPeer {
		return r.debounce
	}
	c := r.renakCap()
	d := r.RTT().Timeout(r.cfg.NakFloor, c)
	if rt > 1 {
		d <<= min(rt-1, 30)
	}
	return min(d, c)
}

// retryDelay is how long the run starting at start waits after its
// rt-th NAK before the next on the timer: renakDelay, or for the window's
// oldest gap while pinned the shorter pinnedDelay.
func (r *Receiver) retryDelay(start uint64, rt uint16) int64 {
	d := r.renakDelay(rt)
	if start == r.expected && r.pinned() {
		d = min(d, r.pinnedDelay(rt))
	}
	return d
}

// pinned reports whether this unicast receiver holds its sender exactly
// at the highest edge it ever advertised (the sender never lowers an
// edge, so a later Status with less consumer room does not stop what is
// already allowed): every seq up to it is known to exist and none beyond,
// so nothing but repairs can be in flight to it.
func (r *Receiver) pinned() bool {
	return r.rackOn() && r.expected != 0 && r.highest == r.maxEdge
}

// rackOn reports whether the order rule (and the pinned one) may judge
// repairs: a unicast receiver whose sender speaks probes and honours its
// edge — nothing is known to exist beyond the highest edge it advertised.
// A receiver its sender released (far behind, repairs from the WAL while
// the stream runs on: highest beyond the edge) keeps the timers.
func (r *Receiver) rackOn() bool {
	return r.fcPeer && r.grp.size <= 1 && r.maxEdge != 0 && r.highest <= r.maxEdge
}

// lostByOrder reports whether data the sender sent after answering the
// last NAK of the run in slot i has arrived while its repair has not.
func (r *Receiver) lostByOrder(i uint64) bool { return r.rackOn() && r.rackSeen > r.loss.gaps[i].edge }

// pinnedDelay is the re-NAK delay of the run at the window's left edge
// while pinned: NakFloor, doubled per retry.
func (r *Receiver) pinnedDelay(rt uint16) int64 {
	d := r.cfg.NakFloor
	if d <= 0 {
		return math.MaxInt64
	}
	if rt > 1 {
		d <<= min(rt-1, 30)
	}
	return d
}

// shortestRenak is the shortest delay after which this receiver may NAK
// a run again on a timer (Status renak_ns): a unicast receiver's pinned
// delay, else its first re-NAK delay. The sender keeps its dedup window
// below half of it. (An order re-NAK can come sooner; a sender that
// dedups it is asked again once newer data passes the run again.)
func (r *Receiver) shortestRenak() int64 {
	d := r.renakDelay(1)
	if r.fcPeer && r.grp.size <= 1 {
		d = min(d, r.pinnedDelay(1))
	}
	return d
}

// renakCap is the longest re-NAK delay: NakDebounce; in a group (other
// receivers heard) a quarter of the silence time instead, at least
// NakDebounce. A repair that has not come within a few RTTs in a group is
// late because some host is behind (the sender, or this receiver
// draining its backlog) far more often than because it was lost; each
// re-NAK goes to every member and each repair to every member, so a
// group's re-NAKs keep doubling rather than settle at NakDebounce: a run
// is asked for about log2(its repair latency / RTT) times, not latency /
// NakDebounce times, and an overloaded group sheds NAK traffic instead of
// adding to it.
func (r *Receiver) renakCap() int64 {
	if r.grp.size <= 1 {
		return r.debounce
	}
	return max(r.debounce, r.silence/4)
}

// advWindow is the number of records the receiver accepts beyond the
// last delivered one: the reorder window, bounded by the consumer's room
// (what it said it could take, less what was delivered since).
func (r *Receiver) advWindow() uint64 {
	if r.room == UnlimitedRoom {
		return r.window
	}
	room := uint64(r.room)
	if used := r.deliveredSeq() - r.roomBase; used < room {
		room -= used
	} else {
		room = 0
	}
	return min(room, r.window)
}

// UnlimitedRoom is the consumer room of a consumer that takes every
// record in the delivery callback (the default).
const UnlimitedRoom = math.MaxInt

// SetConsumerRoom tells the Receiver how many more records its consumer
// can take beyond those delivered so far (e.g. the free slots of the
// ring it delivers into); n < 0 counts as 0, UnlimitedRoom is the
// default. Records delivered after the call use up that room. The advertised window is min(ReorderSlots, room left), and a
// Status goes out at once when a closed window opens. Call it whenever n
// may have changed; it is cheap when nothing is due.
func (r *Receiver) SetConsumerRoom(n int, now int64, out *batch.Vec) {
	r.room, r.roomBase = max(n, 0), r.deliveredSeq()
	r.maybeStatus(now, out)
}

func (r *Receiver) deliveredSeq() uint64 {
	if r.expected == 0 {
		return 0
	}
	return r.expected - 1
}

// statusNews reports whether a non-urgent Status has something to say:
// a change since the last one, an echo, or a sender that looks blocked
// (everything up to the advertised edge is known to exist).
func (r *Receiver) statusNews() bool {
	st := &r.st
	if r.deliveredSeq() != st.delivered || r.highest != st.highest || r.advWindow() != st.window || st.echoTS != 0 {
		return true
	}
	return r.out.Kind == Live && r.expected != 0 && r.highest >= st.delivered+st.window
}

// maybeStatus sends a Status when one is due (docs/protocol.md, "Status
// cadence at the receiver").
func (r *Receiver) maybeStatus(now int64, out *batch.Vec) {
	if r.cfg.NoStatus || !r.heardAny {
		return
	}
	st := &r.st
	w := r.advWindow()
	urgent := st.lastAt == never || r.out.Kind != st.state ||
		r.deliveredSeq() >= st.delivered+max(st.window/4, 1) ||
		(w > st.window && (st.window == 0 || w-st.window >= r.window/4))
	if !urgent {
		since := now - st.lastAt
		if since < r.cfg.StatusInterval {
			return
		}
		if since < r.cfg.HeartbeatInterval && !r.statusNews() {
			return
		}
	}
	r.sendStatus(now, out, 0)
}

// sendStatus appends a Status to out (to the configured sender). False:
// out is full (it is retried on the next call).
func (r *Receiver) sendStatus(now int64, out *batch.Vec, flags uint8) bool {
	buf := out.Next()
	if len(buf) < 80 {
		return false
	}
	st := &r.st
	st.serial++
	st.lastAt = now
	st.delivered = r.deliveredSeq()
	st.highest = r.highest
	st.window = r.advWindow()
	st.state = r.out.Kind
	if r.expected != 0 && st.delivered+st.window > r.maxEdge {
		r.maxEdge = st.delivered + st.window
	}
	s := Status{
		Delivered:  st.delivered,
		Highest:    st.highest,
		ReceiverID: r.id,
		Window:     uint32(min(st.window, math.MaxUint32)),
		Serial:     st.serial,
		State:      st.state,
		Flags:      flags,
	}
	if r.expected != 0 {
		s.Flags |= StatusSynced
	}
	if r.fcPeer {
		s.ReNak = sat32(r.shortestRenak())
	}
	if st.echoTS != 0 {
		s.EchoTS, s.EchoHold = st.echoTS, sat32(now-st.echoAt)
		st.echoTS = 0
	}
	out.Commit(PutStatusFrame(buf, s), r.cfg.Sender)
	r.stats.StatusSent++
	return true
}

// Leave tells the sender that this receiver is closing (a Status with the
// closing flag), so it stops waiting for it at once. Call it before
// closing the path; it sends even while a sticky outcome is set.
func (r *Receiver) Leave(now int64, out *batch.Vec) {
	if !r.cfg.NoStatus && r.heardAny {
		r.sendStatus(now, out, StatusClosing)
	}
}

// Deadline is the time (ns) at which Tick next has work: a re-NAK that is
// due or a Status. The loop may tick earlier; later only delays them.
func (r *Receiver) Deadline() int64 {
	d := int64(math.MaxInt64)
	if r.out.Kind == Live {
		d = r.loss.nextDue
		if r.heardInit {
			d = min(d, r.lastHeard+r.silence)
		}
	}
	if !r.cfg.NoStatus && r.heardAny {
		st := &r.st
		if st.lastAt == never || r.out.Kind != st.state {
			return math.MinInt64
		}
		if r.statusNews() {
			d = min(d, st.lastAt+r.cfg.StatusInterval)
		} else {
			d = min(d, st.lastAt+r.cfg.HeartbeatInterval)
		}
	}
	return d
}

// overrun counts a datagram that carried data beyond the reorder window
// and raises Reconnect once OverrunEvidence such datagrams have arrived
// with no pause longer than NakDebounce, either over at least NakDebounce
// or — while the sender speaks probes, so it honoured the window and has
// now moved on without this receiver (it released it) — all at least two
// windows ahead: a sender that really outran the window, never a single
// (stray or forged) datagram. A burst before the sender heard the first
// Status is repaired by NAK instead.
func (r *Receiver) overrun(seq uint64, now int64) {
	span := r.cfg.NakDebounce
	if r.overrunN == 0 || now-r.overrunLast > span {
		r.overrunSince, r.overrunN, r.overrunFar = now, 0, 0
	}
	r.overrunN++
	if r.fcPeer && seq-r.expected >= 2*r.window {
		r.overrunFar++
	}
	r.overrunLast = now
	if r.overrunN >= r.cfg.OverrunEvidence && (now-r.overrunSince >= span || r.overrunFar >= r.cfg.OverrunEvidence) {
		r.reconnect(seq, now)
	}
}
