package protocol

import (
	"math"
	"math/rand/v2"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// Receiver is the receiving half of a stream: a sans-I/O state machine
// that delivers records in seq order exactly once, NAKs missing runs and
// reports sticky outcomes. It never reads a clock, locks, allocates on
// its hot paths or does I/O. Not safe for concurrent use.
type Receiver struct {
	cfg    ReceiverConfig
	mask   uint64 // ReorderSlots − 1
	window uint64 // ReorderSlots

	// Stream position. Invariants: once synced (expected ≠ 0),
	// live ≤ expected−1 ≤ highest, and every seq below expected was
	// delivered, served by replay (ResetAfterReplay), lies before a late
	// start, or has no record (a Skip).
	expected uint64 // next seq to deliver; 0 = not synced (StartNow only)
	live     uint64 // highest seq this Receiver delivered (not replay); 0 = none
	late     uint64 // seq at which a StartNow delivery began after seq 1; 0 = none
	lateOwed bool   // LateStart is queued before the next delivery
	highest  uint64 // highest seq known to exist
	maxData  uint64 // highest data seq received (delivered or buffered)

	ring     reorderRing  // records ahead of expected (receiver_ring.go)
	loss     lossDetector // NAK state of the missing seqs and the re-NAK policy (receiver_loss.go)
	st       statusReporter
	peer     senderView
	peers    peerSet // multicast: the other receivers of the group (receiver_group.go)
	overrun  overrunDetector
	hole     skipHole // a Skip marker waiting for the records before its hole
	lastSkip SkipNotice
	end      endState // session end marker (session_end.go)
	id       uint64
	silence  int64 // the silence time: HeartbeatInterval × SilenceIntervals

	suspect   bool  // one heartbeat below the delivered seq was heard
	suspectAt int64 // when

	out     Outcome
	stats   ReceiverStats
	events  eventQueue[ReceiverEvent] // unread events (NextEvent)
	lastNow int64                     // now of the last Handle or Tick: the time of events ResetAfterReplay raises
	holdSt  bool                      // HoldStatus: Handle leaves its Status decision to ReleaseStatus
}

// endState is what a session end marker said. Invariant: final is
// meaningful only when set; seen mirrors Ended's done as last reported
// by a StreamEnded event.
type endState struct {
	final uint64
	set   bool
	seen  bool
}

// NewReceiver builds a Receiver. Its reorder ring (ReorderSlots × MaxFrame
// rounded up to 64 bytes) is allocated here, once.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Receiver{
		cfg:     cfg,
		mask:    uint64(cfg.ReorderSlots - 1),
		window:  uint64(cfg.ReorderSlots),
		ring:    newReorderRing(cfg.ReorderSlots, cfg.MaxFrame),
		silence: int64(cfg.HeartbeatInterval) * int64(cfg.SilenceIntervals),
		id:      cfg.ID,
		overrun: overrunDetector{span: int64(cfg.NakDebounce), need: cfg.OverrunEvidence},
	}
	for r.id == 0 {
		r.id = rand.Uint64()
	}
	r.loss = newLossDetector(cfg, r.id, &r.stats)
	r.st = newStatusReporter(cfg, r.id)
	r.peers.ttl = r.silence
	r.begin()
	return r, nil
}

// begin puts the Receiver at its configured start: expecting Start (or
// seq 1), or unsynced for StartNow.
func (r *Receiver) begin() {
	r.expected, r.highest, r.live, r.late = 0, 0, 0, 0
	r.lateOwed = false
	if !r.cfg.StartNow {
		r.expected = max(r.cfg.Start, 1)
		r.highest = r.expected - 1
	}
}

// LateStart is the seq at which delivery began when StartNow made it
// begin after seq 1 (seqs below it exist and are not delivered); 0
// otherwise. ResetAfterReplay and Resync clear it.
func (r *Receiver) LateStart() uint64 { return r.late }

// Outcome returns the sticky state (Kind Live when none).
func (r *Receiver) Outcome() Outcome { return r.out }

// PeerSilent reports whether the sender has been silent for the silence
// time with no gap open. It is not sticky: anything heard clears it.
func (r *Receiver) PeerSilent() bool { return r.peer.silent }

// LastSkip is the last Skip marker this Receiver applied (zero when
// none). It is set before the marker itself reaches the deliver callback
// (as a record of type wal.TypeSkip, in its place in seq order).
func (r *Receiver) LastSkip() SkipNotice { return r.lastSkip }

// ExpectedSeq is the next seq to deliver (0 while a StartNow Receiver
// has heard nothing).
func (r *Receiver) ExpectedSeq() uint64 { return r.expected }

// HighestSeen is the highest seq known to exist.
func (r *Receiver) HighestSeen() uint64 { return r.highest }

// Stats returns a copy of the counters.
func (r *Receiver) Stats() ReceiverStats { return r.stats }

// NaksSent is Stats().NaksSent without copying the rest: a loop reads it
// every iteration to tell the NAKs of a gap from those before it.
func (r *Receiver) NaksSent() uint64 { return r.stats.NaksSent }

// Handle processes one datagram: one frame, or several consecutive frames
// back to back as a coalescing sender packs them. In-order records, and the buffered records they unblock,
// are handed to deliver in seq order; h and payload are valid only
// during the call (payload aliases dgram or the reorder ring), and
// deliver must not call back into the Receiver. NAKs are appended to
// out, addressed to the configured sender. Bad frames are counted by
// reason and dropped; the rest of a coalesced datagram after a bad frame
// is dropped too. While a sticky outcome is set every frame is dropped.
// Status frames (flow control, acknowledgement) are appended to out when
// due. now is monotonic ns. Handle never panics and allocates nothing.
func (r *Receiver) Handle(dgram []byte, now int64, out *batch.Vec, deliver func(h wire.Header, payload []byte)) {
	r.lastNow = now
	first := true
	r.overrun.counted = false
	for len(dgram) > 0 {
		if r.out.Kind != Live {
			r.stats.Dropped++
			break
		}
		h, p, n, err := wire.DecodeFrame(dgram)
		if err != nil {
			r.stats.Bad.count(err, first)
			break
		}
		first = false
		frame := dgram[:n]
		dgram = dgram[n:]
		switch {
		case h.Type == wire.TypeHeartbeat:
			r.heartbeat(p, now, out)
		case h.Type == wire.TypeNak:
			r.heardNak(p, now) // another receiver's, on the group's control group
		case h.Type == wire.TypeStatus:
			r.heardStatus(p, now)
		case h.Type == wire.TypeSessionEnd:
			r.sessionEnd(p, now, out)
		case wire.UDPControl(h.Type):
			r.stats.Ignored++ // reserved types
		default:
			r.data(h, p, frame, now, out, deliver)
		}
	}
	if r.end.set || r.end.seen {
		r.noteEnded(now)
	}
	if !r.holdSt {
		r.maybeStatus(now, out)
	}
}

// HoldStatus makes the next Handle calls leave their Status decision to
// ReleaseStatus: a loop that hands the Receiver a batch of datagrams
// read at once decides once per batch instead of once per datagram (the
// decision reads the delivered seq, the window and the clock: a
// measurable part of a small record's cost). The Status goes out at the
// end of the batch, microseconds later.
func (r *Receiver) HoldStatus() { r.holdSt = true }

// ReleaseStatus ends HoldStatus and sends a Status if one is due.
func (r *Receiver) ReleaseStatus(now int64, out *batch.Vec) {
	r.holdSt = false
	r.maybeStatus(now, out)
}

// raise records that seq exists and NAKs the seqs this newly reveals as
// missing (they are new, so their first NAK goes out at once). held says
// whether seq itself is present (a data record being delivered or
// buffered) rather than only announced by a heartbeat.
func (r *Receiver) raise(seq uint64, held bool, now int64, out *batch.Vec) {
	if seq <= r.highest {
		return
	}
	from := r.highest + 1
	if from < r.expected {
		from = r.expected
	}
	r.highest = seq
	last := seq
	if held {
		last = seq - 1
	}
	if edge := r.expected + r.window - 1; last > edge {
		last = edge // beyond the window: NAKed as the window moves on
	}
	if last >= from {
		r.firstNak(from, last, now, out)
	}
	if gapOpen(r.expected, r.highest) && r.pinned() {
		// highest just reached the edge: the left edge's re-NAK may now
		// be due sooner (highest only grows here, so this fires once).
		r.loss.nextDue = min(r.loss.nextDue, now)
	}
}

func (r *Receiver) reconnect(seq uint64, now int64) {
	r.stats.Reconnects++
	r.setOutcome(Outcome{Kind: Reconnect, LastDelivered: r.expected - 1, Seq: seq}, now)
}

func (r *Receiver) data(h wire.Header, p, frame []byte, now int64, out *batch.Vec, deliver func(wire.Header, []byte)) {
	if len(p) < 8 {
		r.stats.Bad.ShortPayload++
		return
	}
	seq := le.Uint64(p)
	if seq == 0 {
		r.stats.Bad.SeqZero++
		return
	}
	r.heard(now)
	if r.expected == 0 {
		// StartNow, nothing heard yet: this record is now.
		r.expected = seq
		if r.highest < seq-1 {
			r.highest = seq - 1
		}
		if seq > 1 {
			r.late, r.lateOwed = seq, true
		}
	}
	if h.Type == wire.TypeSkip {
		r.skipMarker(h, p, frame, seq, now, out, deliver)
		return
	}
	if seq < r.expected {
		r.stats.Duplicates++
		return
	}
	d := seq - r.expected
	if d >= r.window {
		// Beyond the window: dropped (it is NAKed when the window reaches
		// it). It proves the seqs below exist; a sender that keeps
		// outrunning the window raises Reconnect (overrun).
		r.stats.OutOfWindow++
		r.raise(seq, false, now, out)
		if r.overrun.see(seq-r.expected, r.window, r.peer.probes, now) {
			r.reconnect(seq, now)
		}
		if r.out.Kind == Live && now >= r.loss.nextDue {
			r.pump(now, out)
		}
		return
	}
	if r.loss.delay.order.arrived(seq, r.st.maxEdge) {
		r.loss.orderSeen(seq, r.peer.probes, r.st.maxEdge, r.highest, now)
	}
	// fresh: the next seq to deliver, above any seq ever buffered or
	// given a NAK history (lossDetector.dirty): its slot of the reorder
	// ring and its gap are empty, and neither is read or zeroed.
	fresh := d == 0 && seq > r.maxData && seq > r.loss.dirty
	if !fresh {
		r.loss.rttSample(seq&r.mask, now)
		r.loss.groupSample(seq & r.mask)
	}
	if seq > r.maxData {
		r.maxData = seq
	}
	if d == 0 {
		// news is the common case: the next seq, beyond everything known.
		// Then no seq is missing below it and nothing is buffered above
		// it (buffered seqs and a pending Skip's hole are ≤ highest), so
		// raise has nothing to NAK and drain nothing to deliver.
		news := seq > r.highest
		if news {
			r.highest = seq
			if r.pinned() { // raise's check: a gap is open until expected moves
				r.loss.nextDue = min(r.loss.nextDue, now)
			}
		} else {
			r.raise(seq, true, now, out)
		}
		r.stats.Delivered++
		if !fresh {
			r.clear(seq & r.mask)
		}
		r.expected++
		r.live = seq
		r.lateDelivery(now)
		deliver(h, p)
		if !news {
			r.drain(now, deliver)
		}
		if now >= r.loss.nextDue {
			r.pump(now, out)
		}
		return
	}
	i := seq & r.mask
	if r.ring.has(seq) {
		r.stats.Duplicates++
		return
	}
	if r.hole.holds(seq) {
		r.stats.SkipDiscarded++ // a pending Skip says this seq has no record
		return
	}
	if !r.ring.fits(len(frame)) {
		r.stats.TooLarge++
		return
	}
	r.ring.put(seq, frame)
	r.loss.found(i)
	r.stats.Buffered++
	r.raise(seq, true, now, out)
	if now >= r.loss.nextDue {
		r.pump(now, out)
	}
}

// clear empties slot i of the ring and the loss detector: its seq was
// delivered or has no record.
func (r *Receiver) clear(i uint64) {
	r.ring.drop(i)
	r.loss.clear(i)
}

// drain delivers buffered records that are now in order.
func (r *Receiver) drain(now int64, deliver func(wire.Header, []byte)) {
	for {
		if next, ok := r.hole.jump(r.expected); ok {
			// Everything before a pending Skip is in: jump over its hole
			// (empty when the marker's From is its own seq) to the
			// marker, which is buffered. The hole's gaps are not zeroed
			// (another receiver's NAK may have written them): their
			// slot-mates a window on are not fresh, and zero them.
			r.loss.dirty = max(r.loss.dirty, next-1+r.window)
			r.expected = next
			r.lastSkip = r.hole.marker
			r.stats.Skips++
			r.event(SkipApplied, now, 0, r.lastSkip)
		}
		if !r.ring.has(r.expected) {
			return
		}
		i := r.expected & r.mask
		h, p := r.ring.frame(i)
		r.clear(i)
		r.live = r.expected
		r.expected++
		r.stats.Delivered++
		deliver(h, p)
	}
}

// Tick runs the clock-driven part of the receiver — the reference only
// re-NAKs when a datagram arrives; walcast's receiver has a clock: it
// re-NAKs runs whose debounce has passed and applies the silence rule. Call it
// from the loop at least every few ms, or at Deadline; it is O(1) unless a
// NAK is due. It also sends the Status frames that are due (also while a
// sticky outcome is set, so the sender learns of it). now is monotonic ns.
func (r *Receiver) Tick(now int64, out *batch.Vec) {
	defer r.maybeStatus(now, out)
	r.lastNow = now
	if r.out.Kind != Live {
		return
	}
	if !r.peer.clocked {
		r.peer.lastHeard, r.peer.clocked = now, true // silence counts from the first Tick
	}
	if now-r.peer.lastHeard >= r.silence {
		if gapOpen(r.expected, r.highest) {
			end := r.expected
			for end < r.highest && end-r.expected < r.window-1 && !r.ring.has(end+1) {
				end++
			}
			r.stats.Faults++
			r.setOutcome(Outcome{Kind: Faulted, Cause: Silence, LastDelivered: r.expected - 1, GapStart: r.expected, GapEnd: end}, now)
			return
		}
		if _, ended := r.Ended(); !r.peer.silent && !ended {
			r.peer.silent = true // an ended stream is done, not silent
			r.stats.PeerSilences++
			r.event(PeerSilent, now, 0, SkipNotice{})
		}
		return
	}
	if now >= r.loss.nextDue {
		r.pump(now, out)
	}
}

// ResetAfterReplay resumes live delivery after the consumer caught up to
// tip over TCP, exactly: it clears the sticky outcome, the reorder ring
// and all NAK state, sets the next expected seq to tip+1 and raises
// highest_seen to tip (never lowers it). An idle stream stays quiet
// afterwards; a gap above tip already known is NAKed on the next Tick.
func (r *Receiver) ResetAfterReplay(tip uint64) {
	r.clearAll()
	r.late, r.lateOwed = 0, false
	r.expected = tip + 1
	if r.highest < tip {
		r.highest = tip
	}
	r.loss.nextDue = math.MinInt64
	r.noteEnded(r.lastNow)
}

// Resync forgets the stream position and starts again as a new Receiver
// does: at Start (seq 1 by default), or at the next record or heartbeat
// heard with StartNow. Use it after SenderRestarted when the restarted
// stream's earlier records are not wanted.
func (r *Receiver) Resync() {
	r.clearAll()
	r.begin()
	r.loss.nextDue = noDue
	r.end.final, r.end.set = 0, false // a new stream has not ended
	r.end.seen = false
}

func (r *Receiver) clearAll() {
	for i := range r.ring.slots {
		r.clear(uint64(i))
	}
	r.hole.clear()
	r.out = Outcome{}
	r.peer.clocked = false
	if r.peer.silent {
		r.peer.silent = false
		r.event(PeerHeard, r.lastNow, 0, SkipNotice{})
	}
	r.maxData = 0
	r.overrun.n, r.overrun.far = 0, 0
	r.suspect = false
	r.st.maxEdge = 0
	r.loss.delay.order = orderRule{min: math.MaxUint64}
}
