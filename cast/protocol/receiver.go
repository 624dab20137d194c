package protocol

import (
	"math"
	"math/rand/v2"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

// Receiver is the receiving half of a stream: a sans-I/O state machine
// that delivers records in seq order exactly once, NAKs missing runs and
// reports sticky outcomes. It never reads a clock, locks, allocates on
// its hot paths or does I/O. Not safe for concurrent use.
type Receiver struct {
	cfg      ReceiverConfig
	mask     uint64
	window   uint64
	ring     reorderRing  // records ahead of expected
	loss     lossDetector // NAK state of the missing seqs
	expected uint64       // next seq to deliver; 0 = not synced (StartNow only)
	live     uint64       // highest seq this Receiver delivered (not replay); 0 = none
	late     uint64       // seq at which a StartNow delivery began after seq 1; 0 = none
	highest  uint64       // highest seq known to exist
	holeFrom uint64       // pending Skip: seqs holeFrom … holeTo have no record (0: none)
	holeTo   uint64
	pending  SkipNotice
	lastSkip SkipNotice
	debounce int64
	silence  int64

	lastHeard int64
	heardInit bool
	silent    bool

	id       uint64
	heardAny bool   // anything valid heard from the sender (Status may go out)
	fcPeer   bool   // the last heartbeat was a probe
	room     int    // consumer room (SetConsumerRoom) or UnlimitedRoom
	roomBase uint64 // delivered seq when room was set
	peerSRTT int64  // the sender's estimate, from its last probe (ns)
	peerVar  int64
	maxData  uint64 // highest data seq received (delivered or buffered)
	rtt      RTT
	sampleAt int64 // nakAt of the last RTT sample (one sample per NAK batch)
	st       statusState
	dgramOOW bool // the datagram being handled already counted as overrun evidence

	overrunN, overrunFar      int
	overrunSince, overrunLast int64
	suspect                   bool  // one heartbeat below the delivered seq was heard
	suspectAt                 int64 // when
	senderID                  uint64
	probeTS                   uint64 // ts of the newest probe heard from senderID

	grp    groupState // multicast: other receivers, NAK suppression (receiver_group.go)
	end    uint64     // final seq of a session end marker (session_end.go)
	endSet bool

	out   Outcome
	stats ReceiverStats

	events    eventQueue // unread events (NextEvent)
	lateOwed  bool       // LateStart is queued before the next delivery
	endedSeen bool       // Ended reported done when last looked at (StreamEnded)
	lastNow   int64      // now of the last Handle or Tick: the time of events ResetAfterReplay raises
}

// NewReceiver builds a Receiver. Its reorder ring (ReorderSlots × MaxFrame
// rounded up to 64 bytes) is allocated here, once.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Receiver{
		cfg:      cfg,
		mask:     uint64(cfg.ReorderSlots - 1),
		window:   uint64(cfg.ReorderSlots),
		ring:     newReorderRing(cfg.ReorderSlots, cfg.MaxFrame),
		debounce: int64(cfg.NakDebounce),
		silence:  int64(cfg.HeartbeatInterval) * int64(cfg.SilenceIntervals),
		id:       cfg.ID,
		room:     UnlimitedRoom,
	}
	for r.id == 0 {
		r.id = rand.Uint64()
	}
	r.loss = newLossDetector(cfg, r.id)
	r.st.lastAt = never
	r.grp.init(cfg)
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
func (r *Receiver) PeerSilent() bool { return r.silent }

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
func (r *Receiver) Handle(dgram []byte, now int64, out *batch.Vec, deliver func(h wal.Header, payload []byte)) {
	r.lastNow = now
	first := true
	r.dgramOOW = false
	for len(dgram) > 0 {
		if r.out.Kind != Live {
			r.stats.Dropped++
			break
		}
		h, p, n, err := wal.DecodeFrame(dgram)
		if err != nil {
			r.stats.Bad.count(err, first)
			break
		}
		first = false
		frame := dgram[:n]
		dgram = dgram[n:]
		switch {
		case h.Type == wal.TypeHeartbeat:
			r.heartbeat(p, now, out)
		case h.Type == wal.TypeNak:
			r.heardNak(p, now) // another receiver's, on the group's control group
		case h.Type == TypeStatus:
			r.heardStatus(p, now)
		case h.Type == TypeSessionEnd:
			r.sessionEnd(p, now, out)
		case IsControl(h.Type):
			r.stats.Ignored++ // reserved types
		default:
			r.data(h, p, frame, now, out, deliver)
		}
	}
	if r.endSet || r.endedSeen {
		r.noteEnded(now)
	}
	r.maybeStatus(now, out)
}

func (r *Receiver) heard(now int64) {
	r.lastHeard = now
	r.heardInit = true
	if r.silent {
		r.silent = false
		r.event(PeerHeard, now, 0, SkipNotice{})
	}
	r.heardAny = true
}

func (r *Receiver) heartbeat(p []byte, now int64, out *batch.Vec) {
	hb, err := ParseProbe(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	r.stats.Heartbeats++
	r.heard(now)
	r.fcPeer = hb.TS != 0
	sameSender := false
	if r.fcPeer {
		r.stats.Probes++
		if hb.SenderID == r.senderID && hb.TS < r.probeTS {
			// A probe overtaken by a newer one (reordered): old news.
			r.stats.StaleHeartbeats++
			return
		}
		sameSender = hb.SenderID == r.senderID
		r.senderID, r.probeTS = hb.SenderID, hb.TS
		r.st.echoTS, r.st.echoAt = hb.TS, now
		r.peerSRTT, r.peerVar = int64(hb.SRTT), int64(hb.RTTVar)
	}
	if r.expected == 0 {
		// StartNow, nothing heard yet: now is just after the highest seq.
		r.expected, r.highest = hb.Highest+1, hb.Highest
		if hb.Highest > 0 {
			r.late, r.lateOwed = r.expected, true
		}
		return
	}
	if hb.Highest < r.expected-1 {
		if hb.Highest >= r.live {
			// Below the replay tip but not below anything this Receiver
			// delivered: a heartbeat queued before a TCP catch-up moved the
			// tip (records served by replay are durable, so a sender with a
			// WAL cannot have lost them). Not a restart.
			r.stats.StaleHeartbeats++
			return
		}
		// Below what this Receiver delivered itself. From the sender
		// whose probes we know (same sender id), it is a probe overtaken
		// by data, not a restart. Otherwise one such datagram may be stray
		// or forged; a second within the silence time is a restart (a
		// restarted sender announces itself repeatedly).
		if sameSender {
			r.stats.StaleHeartbeats++
			return
		}
		if !r.suspect || now-r.suspectAt >= r.silence {
			r.suspect, r.suspectAt = true, now
			r.stats.RestartSuspects++
			return
		}
		r.stats.Restarts++
		r.setOutcome(Outcome{Kind: SenderRestarted, LastDelivered: r.expected - 1, Highest: hb.Highest}, now)
		return
	}
	r.suspect = false
	if hb.Highest < r.highest {
		// The sender's word on what exists: seqs announced earlier (by a
		// forged or stale heartbeat, or data beyond the window) that it
		// says it never sent are forgotten, so no phantom gap can fault.
		if low := max(hb.Highest, r.maxData); low < r.highest {
			r.highest = low
			r.stats.Lowered++
		}
		return
	}
	// Announced seqs ahead, even beyond the window: NAK what the window
	// holds and let the retry budget decide (the reference's rule).
	r.raise(hb.Highest, false, now, out)
	if now >= r.loss.nextDue {
		r.pump(now, out)
	}
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
	if r.gapOpen() && r.pinned() {
		// highest just reached the edge: the left edge's re-NAK may now
		// be due sooner (highest only grows here, so this fires once).
		r.loss.nextDue = min(r.loss.nextDue, now)
	}
}

func (r *Receiver) reconnect(seq uint64, now int64) {
	r.stats.Reconnects++
	r.setOutcome(Outcome{Kind: Reconnect, LastDelivered: r.expected - 1, Seq: seq}, now)
}

func (r *Receiver) data(h wal.Header, p, frame []byte, now int64, out *batch.Vec, deliver func(wal.Header, []byte)) {
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
	if h.Type == wal.TypeSkip {
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
		if !r.dgramOOW {
			r.dgramOOW = true
			r.overrun(seq, now)
		}
		if r.out.Kind == Live && now >= r.loss.nextDue {
			r.pump(now, out)
		}
		return
	}
	r.orderSeen(seq, now)
	r.rttSample(seq&r.mask, now)
	r.groupSample(seq & r.mask)
	if seq > r.maxData {
		r.maxData = seq
	}
	if d == 0 {
		r.raise(seq, true, now, out)
		r.stats.Delivered++
		r.clear(seq & r.mask)
		r.expected++
		r.live = seq
		r.lateDelivery(now)
		deliver(h, p)
		r.drain(now, deliver)
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
	if r.holeFrom != 0 && seq >= r.holeFrom && seq <= r.holeTo {
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

// skipMarker applies a Skip marker at seq: the seqs sk.From … seq−1 have
// no record. When every seq before them is delivered (sk.From ≤
// expected) the stream jumps to the marker at once, dropping what was
// buffered in between and noting the seqs it had delivered in that range;
// otherwise the marker is buffered and the jump waits until the records
// before the hole are in (they are NAKed, the hole is not). The marker is
// delivered in its place in seq order.
func (r *Receiver) skipMarker(h wal.Header, p, frame []byte, seq uint64, now int64, out *batch.Vec, deliver func(wal.Header, []byte)) {
	sk, err := wal.ParseSkip(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	if seq < r.expected {
		r.stats.Duplicates++
		return
	}
	if sk.From > r.expected {
		// Records before the hole are still missing.
		if seq-r.expected >= r.window || (r.holeFrom != 0 && r.holeFrom != sk.From) {
			r.reconnect(seq, now)
			return
		}
		i := seq & r.mask
		if r.ring.has(seq) || !r.ring.fits(len(frame)) {
			r.stats.Duplicates++
			return
		}
		r.holeFrom, r.holeTo = sk.From, seq-1
		r.pending = SkipNotice{Skip: sk}
		r.ring.put(seq, frame)
		r.loss.found(i)
		r.stats.Buffered++
		r.raise(sk.From-1, false, now, out)
		r.highest = max(r.highest, seq)
		if now >= r.loss.nextDue {
			r.pump(now, out)
		}
		return
	}
	n := SkipNotice{Skip: sk}
	if r.expected > sk.From {
		n.LostFrom, n.LostTo = sk.From, r.expected-1
		r.stats.SkipLost += r.expected - sk.From
	}
	for q := r.expected; q < seq && q-r.expected < r.window; q++ {
		i := q & r.mask
		if r.ring.has(q) {
			r.stats.SkipDiscarded++
		}
		r.clear(i)
	}
	r.holeFrom, r.holeTo = 0, 0
	r.expected = seq
	r.lastSkip = n
	r.stats.Skips++
	r.raise(seq, true, now, out)
	r.stats.Delivered++
	r.clear(seq & r.mask)
	r.expected++
	r.live = seq
	r.lateDelivery(now)
	r.event(SkipApplied, now, 0, n)
	deliver(h, p)
	r.drain(now, deliver)
	if now >= r.loss.nextDue {
		r.pump(now, out)
	}
}

// drain delivers buffered records that are now in order.
func (r *Receiver) drain(now int64, deliver func(wal.Header, []byte)) {
	for {
		if r.holeFrom != 0 && r.expected == r.holeFrom {
			// Everything before a pending Skip is in: jump over its hole
			// (empty when the marker's From is its own seq) to the
			// marker, which is buffered.
			r.expected = r.holeTo + 1
			r.holeFrom, r.holeTo = 0, 0
			r.lastSkip = r.pending
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
	if !r.heardInit {
		r.lastHeard, r.heardInit = now, true // silence counts from the first Tick
	}
	if now-r.lastHeard >= r.silence {
		if r.gapOpen() {
			end := r.expected
			for end < r.highest && end-r.expected < r.window-1 && !r.ring.has(end+1) {
				end++
			}
			r.stats.Faults++
			r.setOutcome(Outcome{Kind: Faulted, Cause: Silence, LastDelivered: r.expected - 1, GapStart: r.expected, GapEnd: end}, now)
			return
		}
		if _, ended := r.Ended(); !r.silent && !ended {
			r.silent = true // an ended stream is done, not silent
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
	r.end, r.endSet = 0, false // a new stream has not ended
	r.endedSeen = false
}

func (r *Receiver) clearAll() {
	for i := range r.ring.slots {
		r.clear(uint64(i))
	}
	r.holeFrom, r.holeTo = 0, 0
	r.out = Outcome{}
	r.heardInit = false
	if r.silent {
		r.silent = false
		r.event(PeerHeard, r.lastNow, 0, SkipNotice{})
	}
	r.maxData = 0
	r.overrunN, r.overrunFar = 0, 0
	r.suspect = false
	r.st.maxEdge = 0
	r.loss.delay.order = orderRule{min: math.MaxUint64}
}
