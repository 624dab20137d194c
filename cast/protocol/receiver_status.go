package protocol

import (
	"math"
	"net/netip"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// statusReporter is the Receiver's side of flow control: what its last
// Status told the sender, the probe it owes an echo, and the consumer
// room it advertises; it decides when the next Status is due
// (docs/protocol.md, "Status cadence at the receiver") and writes it.
// What a Status says of the rest of the Receiver comes in as a
// statusInput.
//
// Invariants: maxEdge = max over the Status frames sent by a synced
// receiver of delivered+window, never lowered (the sender never lowers
// an edge either); echoTS ≠ 0 only until the next Status carries it;
// window ≤ slots; lastAt is never until the first Status; urgentAt is
// delivered plus the stride of the window the last Status advertised.
type statusReporter struct {
	lastAt    int64 // when the last Status went out; never: none yet
	delivered uint64
	highest   uint64
	window    uint64
	state     OutcomeKind
	serial    uint32
	urgentAt  uint64 // a Status is urgent once this seq is delivered

	step uint64 // a window opening by this many records is urgent

	maxEdge uint64 // highest edge (delivered+window) any Status advertised; never lowered

	echoTS uint64 // probe ts to echo in the next Status (0: none)
	echoAt int64  // when that probe was heard

	room     int    // consumer room (SetConsumerRoom) or UnlimitedRoom
	roomBase uint64 // delivered seq when room was set

	slots     uint64         // ReorderSlots: the largest window
	interval  int64          // StatusInterval, ns
	heartbeat int64          // HeartbeatInterval, ns
	dest      netip.AddrPort // where Status goes (ReceiverConfig.Sender)
	id        uint64         // this receiver's id
}

// statusInput is what a Status reports of the rest of the Receiver now.
type statusInput struct {
	delivered uint64      // every seq ≤ delivered was delivered (0: none)
	highest   uint64      // highest seq known to exist
	state     OutcomeKind // the Receiver's outcome
	synced    bool        // it has a stream position
}

func newStatusReporter(cfg ReceiverConfig, id uint64) statusReporter {
	return statusReporter{
		lastAt:    never,
		room:      UnlimitedRoom,
		slots:     uint64(cfg.ReorderSlots),
		step:      min(uint64(cfg.ReorderSlots), statusSpan) / 4,
		interval:  int64(cfg.StatusInterval),
		heartbeat: int64(cfg.HeartbeatInterval),
		dest:      cfg.Sender,
		id:        id,
	}
}

// statusSpan bounds the window the receiver's urgent Status rules are
// measured against, records: a Status goes out at once after a quarter
// of min(window, statusSpan) was delivered, or when the window opened by
// a quarter of min(ReorderSlots, statusSpan). A sender without a log runs
// at most its RingSlots past the delivered seq of the last Status it
// heard (flowController.repairableEdge), whatever window was granted, and
// the receiver cannot know that ring: measured against a window of
// ReorderSlots 1<<16 alone, the Status came after 16384 records and the
// sender, clamped at 4096 past the last one, waited for the 1 ms
// StatusInterval instead (≈ 4096 records per ms). With the default ring
// as the bound, such a sender hears a Status every 1024 records, with
// three quarters of its ring left to cover the round trip. A window up to
// DefaultSendRingSlots (the default reorder window is 2048) keeps the
// quarter-window rule exactly; a wider one costs one 80-byte Status per
// 1024 records delivered, per receiver. The bound is what the sender's
// ring is by default, not what it is: a sender configured with a smaller
// ring than a receiver's window may still wait for the interval.
const statusSpan = DefaultSendRingSlots

// UnlimitedRoom is the consumer room of a consumer that takes every
// record in the delivery callback (the default).
const UnlimitedRoom = math.MaxInt

// advWindow is the number of records the receiver accepts beyond the
// last delivered one: the reorder window, bounded by the consumer's room
// (what it said it could take, less what was delivered since).
func (s *statusReporter) advWindow(delivered uint64) uint64 {
	if s.room == UnlimitedRoom {
		return s.slots
	}
	room := uint64(s.room)
	if used := delivered - s.roomBase; used < room {
		room -= used
	} else {
		room = 0
	}
	return min(room, s.slots)
}

// setRoom records the consumer room n (n < 0 counts as 0) as of
// delivered.
func (s *statusReporter) setRoom(n int, delivered uint64) { s.room, s.roomBase = max(n, 0), delivered }

// echo notes a probe's ts, heard at now, for the next Status to echo.
func (s *statusReporter) echo(ts uint64, now int64) { s.echoTS, s.echoAt = ts, now }

// news reports whether a non-urgent Status has something to say:
// a change since the last one, an echo, or a sender that looks blocked
// (everything up to the advertised edge is known to exist).
func (s *statusReporter) news(in statusInput) bool {
	if in.delivered != s.delivered || in.highest != s.highest || s.advWindow(in.delivered) != s.window || s.echoTS != 0 {
		return true
	}
	return in.state == Live && in.synced && in.highest >= s.delivered+s.window
}

// urgent reports whether a Status must go out at once for news of the
// stream: none sent yet, a new outcome, a quarter of the last window
// (bounded by statusSpan) delivered since the last (opened is the other
// urgent news).
func (s *statusReporter) urgent(delivered uint64, state OutcomeKind) bool {
	return s.lastAt == never || state != s.state || delivered >= s.urgentAt
}

// opened reports whether the window opened since the last Status, from
// closed or by a quarter of the slots (bounded by statusSpan): a Status
// must go out at once.
func (s *statusReporter) opened(delivered uint64) bool {
	w := s.advWindow(delivered)
	return w > s.window && (s.window == 0 || w-s.window >= s.step)
}

// onInterval reports whether a Status that is not urgent is due now:
// once StatusInterval has passed with news, and at least every
// HeartbeatInterval.
func (s *statusReporter) onInterval(in statusInput, now int64) bool {
	since := now - s.lastAt
	if since < s.interval {
		return false
	}
	return since >= s.heartbeat || s.news(in)
}

// due reports whether a Status should go out now: urgent or opened, or
// due on the interval.
func (s *statusReporter) due(in statusInput, now int64) bool {
	return s.urgent(in.delivered, in.state) || s.opened(in.delivered) || s.onInterval(in, now)
}

// deadline lowers d to when the next Status is due (math.MinInt64: now).
func (s *statusReporter) deadline(d int64, in statusInput) int64 {
	if s.lastAt == never || in.state != s.state {
		return math.MinInt64
	}
	if s.news(in) {
		return min(d, s.lastAt+s.interval)
	}
	return min(d, s.lastAt+s.heartbeat)
}

// put writes a Status with flags into buf (room for one: at least
// statusRoom bytes) and records what it said; renak is the shortest
// re-NAK delay to announce (0: none). It returns the frame's length.
func (s *statusReporter) put(buf []byte, in statusInput, renak int64, flags uint8, now int64) int {
	s.serial++
	s.lastAt = now
	s.delivered = in.delivered
	s.highest = in.highest
	s.window = s.advWindow(in.delivered)
	s.urgentAt = s.delivered + max(min(s.window, statusSpan)/4, 1)
	s.state = in.state
	if in.synced && s.delivered+s.window > s.maxEdge {
		s.maxEdge = s.delivered + s.window
	}
	st := wire.Status{
		Delivered:  s.delivered,
		Highest:    s.highest,
		ReceiverID: s.id,
		Window:     uint32(min(s.window, math.MaxUint32)),
		Serial:     s.serial,
		State:      uint8(s.state),
		Flags:      flags,
		ReNak:      sat32(renak),
	}
	if in.synced {
		st.Flags |= wire.StatusSynced
	}
	if s.echoTS != 0 {
		st.EchoTS, st.EchoHold = s.echoTS, sat32(now-s.echoAt)
		s.echoTS = 0
	}
	return wire.PutStatusFrame(buf, st)
}

// statusRoom is the room a Status frame needs in a batch slot, bytes.
const statusRoom = 80

// The Receiver's side of Status.

// ID is the receiver id carried in Status.
func (r *Receiver) ID() uint64 { return r.id }

// statusIn is what a Status reports of the Receiver now.
func (r *Receiver) statusIn() statusInput {
	return statusInput{delivered: r.deliveredSeq(), highest: r.highest, state: r.out.Kind, synced: r.expected != 0}
}

func (r *Receiver) deliveredSeq() uint64 {
	if r.expected == 0 {
		return 0
	}
	return r.expected - 1
}

// advWindow is the window the Receiver advertises now.
func (r *Receiver) advWindow() uint64 { return r.st.advWindow(r.deliveredSeq()) }

// SetConsumerRoom tells the Receiver how many more records its consumer
// can take beyond those delivered so far (e.g. the free slots of the
// ring it delivers into); n < 0 counts as 0, UnlimitedRoom is the
// default. Records delivered after the call use up that room. The advertised window is min(ReorderSlots, room left), and a
// Status goes out at once when a closed window opens. Call it whenever n
// may have changed; it is cheap when nothing is due.
func (r *Receiver) SetConsumerRoom(n int, now int64, out *batch.Vec) {
	r.st.setRoom(n, r.deliveredSeq())
	r.maybeStatus(now, out)
}

// maybeStatus sends a Status when one is due.
func (r *Receiver) maybeStatus(now int64, out *batch.Vec) {
	if r.cfg.NoStatus || !r.peer.heard {
		return
	}
	// st.due spelt out, so that its common case (not urgent, the
	// interval not passed) inlines here: this runs on every Handle.
	d := r.deliveredSeq()
	if r.st.urgent(d, r.out.Kind) || r.st.opened(d) ||
		(now-r.st.lastAt >= r.st.interval && r.st.onInterval(r.statusIn(), now)) {
		r.sendStatus(now, out, 0)
	}
}

// sendStatus appends a Status to out (to the configured sender), with
// the re-NAK delay while the sender speaks probes. False: out is full
// (it is retried on the next call).
func (r *Receiver) sendStatus(now int64, out *batch.Vec, flags uint8) bool {
	buf := out.Next()
	if len(buf) < statusRoom {
		return false
	}
	var renak int64
	if r.peer.probes {
		renak = r.shortestRenak()
	}
	out.Commit(r.st.put(buf, r.statusIn(), renak, flags, now), r.st.dest)
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
		d = r.st.deadline(d, r.statusIn())
	}
	return d
}
