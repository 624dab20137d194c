package protocol

import (
	"math"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// statusReporter is the Receiver's side of flow control: what its last
// Status told the sender, the probe it owes an echo, and the consumer
// room it advertises. Invariants: maxEdge = max over the Status frames
// sent of delivered+window, never lowered (the sender never lowers an
// edge either); echoTS ≠ 0 only until the next Status carries it.
type statusReporter struct {
	lastAt    int64 // when the last Status went out; never: none yet
	delivered uint64
	highest   uint64
	window    uint64
	state     OutcomeKind
	serial    uint32

	maxEdge uint64 // highest edge (delivered+window) any Status advertised; never lowered

	echoTS uint64 // probe ts to echo in the next Status (0: none)
	echoAt int64  // when that probe was heard

	room     int    // consumer room (SetConsumerRoom) or UnlimitedRoom
	roomBase uint64 // delivered seq when room was set
}

// ID is the receiver id carried in Status.
func (r *Receiver) ID() uint64 { return r.id }

// RTT returns the receiver's view of the round trip: the larger of its
// own NAK → retransmit estimate (which includes the sender's repair time,
// e.g. a cold read) and the sender's probe estimate (which keeps it right
// when Karn's rule starves its own: a run whose RTT grew past the re-NAK
// delay is NAKed twice and gives no sample). Samples counts its own.
//
// In a group, once it has groupOwnSamples of its own, it is its own
// estimate alone. The sender's estimate is then one for the whole group,
// fed by every member's Status echoes, and on a loaded host those carry
// the other members' time off the CPU: it stretched this receiver's
// re-NAK timer, so a repair lost on its own link waited tens of ms where
// a receiver alone asks again at once. Its own estimate cannot starve
// there (groupRTTSample measures a run NAKed more than once from its
// first NAK), and it still carries what its own repairs take: the
// sender's time, a cold read, its own time off the CPU.
func (r *Receiver) RTT() RTT {
	if r.loss.group && r.loss.size > 1 && r.loss.rtt.samples >= groupOwnSamples {
		return r.loss.rtt
	}
	return RTT{srtt: max(r.loss.rtt.srtt, r.peer.srtt), rttvar: max(r.loss.rtt.rttvar, r.peer.rttvar), samples: r.loss.rtt.samples}
}

// groupOwnSamples is how many NAK → repair round trips of its own a
// group receiver measures before its own estimate alone times its NAKs
// (an RFC 6298 estimator has settled after a few).
const groupOwnSamples = 8

// SpeaksProbes reports whether the sender's last heartbeat was a probe:
// it has heard this receiver's Status and honours its window.
func (r *Receiver) SpeaksProbes() bool { return r.peer.probes }

// advWindow is the number of records the receiver accepts beyond the
// last delivered one: the reorder window, bounded by the consumer's room
// (what it said it could take, less what was delivered since).
func (r *Receiver) advWindow() uint64 {
	if r.st.room == UnlimitedRoom {
		return r.window
	}
	room := uint64(r.st.room)
	if used := r.deliveredSeq() - r.st.roomBase; used < room {
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
	r.st.room, r.st.roomBase = max(n, 0), r.deliveredSeq()
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
	if r.cfg.NoStatus || !r.peer.heard {
		return
	}
	st := &r.st
	w := r.advWindow()
	urgent := st.lastAt == never || r.out.Kind != st.state ||
		r.deliveredSeq() >= st.delivered+max(st.window/4, 1) ||
		(w > st.window && (st.window == 0 || w-st.window >= r.window/4))
	if !urgent {
		since := now - st.lastAt
		if since < int64(r.cfg.StatusInterval) {
			return
		}
		if since < int64(r.cfg.HeartbeatInterval) && !r.statusNews() {
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
	if r.expected != 0 && st.delivered+st.window > st.maxEdge {
		st.maxEdge = st.delivered + st.window
	}
	s := wire.Status{
		Delivered:  st.delivered,
		Highest:    st.highest,
		ReceiverID: r.id,
		Window:     uint32(min(st.window, math.MaxUint32)),
		Serial:     st.serial,
		State:      uint8(st.state),
		Flags:      flags,
	}
	if r.expected != 0 {
		s.Flags |= wire.StatusSynced
	}
	if r.peer.probes {
		s.ReNak = sat32(r.shortestRenak())
	}
	if st.echoTS != 0 {
		s.EchoTS, s.EchoHold = st.echoTS, sat32(now-st.echoAt)
		st.echoTS = 0
	}
	out.Commit(wire.PutStatusFrame(buf, s), r.cfg.Sender)
	r.stats.StatusSent++
	return true
}

// Leave tells the sender that this receiver is closing (a Status with the
// closing flag), so it stops waiting for it at once. Call it before
// closing the path; it sends even while a sticky outcome is set.
func (r *Receiver) Leave(now int64, out *batch.Vec) {
	if !r.cfg.NoStatus && r.peer.heard {
		r.sendStatus(now, out, wire.StatusClosing)
	}
}

// Deadline is the time (ns) at which Tick next has work: a re-NAK that is
// due or a Status. The loop may tick earlier; later only delays them.
func (r *Receiver) Deadline() int64 {
	d := int64(math.MaxInt64)
	if r.out.Kind == Live {
		d = r.loss.nextDue
		if r.peer.clocked {
			d = min(d, r.peer.lastHeard+r.silence)
		}
	}
	if !r.cfg.NoStatus && r.peer.heard {
		st := &r.st
		if st.lastAt == never || r.out.Kind != st.state {
			return math.MinInt64
		}
		if r.statusNews() {
			d = min(d, st.lastAt+int64(r.cfg.StatusInterval))
		} else {
			d = min(d, st.lastAt+int64(r.cfg.HeartbeatInterval))
		}
	}
	return d
}
