package protocol

import (
	"math"
	"net/netip"

	"github.com/walcast/walcast/internal/pressure"
	"github.com/walcast/walcast/wire"
)

// ErrBackpressure is returned by Sender.Send and SendFrame while flow
// control forbids the next seq: it lies beyond the window of a receiver
// that throttles. No seq is consumed. errors.Is(ErrBackpressure,
// wal.ErrBackpressure) is true, so loops that leave a record queued on the
// WAL's backpressure do the same here. Unlike the WAL's, it clears only
// when the receiver's next Status is handled: return to the loop (Handle,
// Tick) before retrying; never spin on Send.
var ErrBackpressure error = backpressure{}

type backpressure struct{}

func (backpressure) Error() string { return "cast: receiver window closed (flow control)" }

func (backpressure) Is(target error) bool { return target == pressure.Err }

// ReceiverInfo is what the Sender knows of one receiver under flow
// control, as of its last Status.
type ReceiverInfo struct {
	ID        uint64
	Addr      netip.AddrPort // source of its Status
	Delivered uint64         // every seq ≤ Delivered was delivered
	Highest   uint64         // highest seq it knows to exist
	Edge      uint64         // highest seq it accepts (Delivered + Window, never lowered)
	Window    uint32
	State     OutcomeKind
	Synced    bool  // it has a stream position
	Closing   bool  // it said it is leaving
	Stalled   bool  // released for making no progress (ReceiverStalled)
	Throttles bool  // it currently limits Send
	LastHeard int64 // sender clock, ns
	SRTT      int64 // ns, from its echoes (0: none yet)
	RTTVar    int64 // ns
	ReNak     int64 // its first re-NAK delay, ns (0: fixed timers)
}

type rcvSlot struct {
	used   bool
	proven bool // it echoed one of this sender's probes (prober.echoes)
	info   ReceiverInfo
	serial uint32
	rtt    RTT
}

// flowController keeps the table of receivers that spoke Status and
// turns their windows into the limit on Send: the edges of the receivers
// that throttle, combined by the FlowPolicy (flow_group.go). Before any
// Status the initial window bounds Send instead.
//
// Invariants: active is the number of used slots, every used slot is
// below hi and slot hi−1 is used (hi = 0: none), and no two used slots
// hold the same id; within one id a receiver's Edge never moves down and
// a Status older by serial than the last one changes nothing but
// LastHeard. limited, limit and covered are what fold last computed from
// the table and are recomputed on every change to it. blockedAt is the
// first refused Send since the limit last moved (0: none). negotiated
// turns true with the first valid Status and stays true.
type flowController struct {
	cfg     *SenderConfig
	rcv     []rcvSlot
	hi      int    // the slots from hi on are unused: the scans stop there
	active  int    // used slots
	limited bool   // some receiver throttles
	limit   uint64 // highest seq Send may assign while limited
	covered uint64 // lowest Highest among live negotiated receivers

	blockedAt  int64
	negotiated bool
	initial    initialWindow
	hasLog     bool // cold reads can repair a receiver from the WAL

	stats *SenderStats // the counters it adds to
}

// statusNews is what one Status tells the rest of the Sender.
type statusNews struct {
	accepted bool  // a new Status of a known or newly joined receiver
	joined   bool  // a receiver joined or restarted
	echo     bool  // it echoed a probe: rtt is a sample
	rtt      int64 // the round trip that echo measured, ns
}

func newFlowController(cfg *SenderConfig, hasLog bool, stats *SenderStats) flowController {
	return flowController{
		cfg:     cfg,
		rcv:     make([]rcvSlot, cfg.MaxReceivers),
		initial: newInitialWindow(cfg, hasLog, stats),
		hasLog:  hasLog,
		stats:   stats,
	}
}

// status processes one Status frame payload from addr, queueing the
// receiver's changes on ev; probe tells an echo of one of the sender's
// probes. The caller folds the table again when the news is accepted.
func (fc *flowController) status(p []byte, from netip.AddrPort, now int64, probe *prober, ev *eventQueue[SenderEvent]) statusNews {
	if fc.cfg.NoFlowControl {
		fc.stats.Ignored++
		return statusNews{}
	}
	st, err := wire.ParseStatus(p)
	if err != nil {
		fc.stats.BadStatus++
		return statusNews{}
	}
	r := fc.find(st.ReceiverID)
	if r != nil && r.used && int32(st.Serial-r.serial) <= 0 {
		r.info.LastHeard = now // reordered or duplicated: alive, but old news
		fc.stats.StaleStatus++
		return statusNews{}
	}
	var joined SenderEventKind
	var prev uint64
	fc.negotiated = true
	if r == nil {
		i := fc.slotFor(from)
		if i < 0 {
			fc.stats.StatusRejected++
			return statusNews{}
		}
		r = &fc.rcv[i]
		if r.used && !sameAddr(r.info.Addr, from) {
			// The table is full: the least recently heard receiver
			// that never echoed a probe makes room.
			fc.stats.ReceiversEvicted++
			fc.event(ev, ReceiverLost, now, r, 0)
			fc.drop(r)
		}
		if r.used {
			joined, prev = ReceiverRestarted, r.info.ID
		} else {
			joined = ReceiverJoined
			fc.active++
		}
		*r = rcvSlot{used: true, info: ReceiverInfo{ID: st.ReceiverID, Addr: from}}
		fc.hi = max(fc.hi, i+1)
	}
	fc.stats.Statuses++
	news := statusNews{accepted: true, joined: joined != 0}
	in := &r.info
	wasState := in.State
	progressed := in.Stalled && st.Delivered > in.Delivered
	if progressed {
		in.Stalled = false
	}
	r.serial = st.Serial
	in.LastHeard = now
	in.Delivered, in.Highest, in.Window, in.State = st.Delivered, st.Highest, st.Window, OutcomeKind(st.State)
	in.Synced = st.Flags&wire.StatusSynced != 0
	in.Closing = st.Flags&wire.StatusClosing != 0
	in.ReNak = int64(st.ReNak)
	if in.Synced {
		in.Edge = max(in.Edge, st.Edge())
	} else {
		in.Edge = 0
	}
	if st.EchoTS != 0 && int64(st.EchoTS) <= now {
		news.echo, news.rtt = true, now-int64(st.EchoTS)-int64(st.EchoHold)
		if probe.echoes(int64(st.EchoTS)) {
			r.proven = true
		}
		r.rtt.Sample(news.rtt)
		in.SRTT, in.RTTVar = r.rtt.SRTT(), r.rtt.RTTVar()
	}
	switch {
	case joined != 0:
		fc.event(ev, joined, now, r, prev)
		if in.State != Live {
			fc.event(ev, ReceiverFaulted, now, r, 0)
		}
	case wasState == Live && in.State != Live:
		fc.event(ev, ReceiverFaulted, now, r, 0)
	case wasState != Live && in.State == Live, progressed:
		fc.event(ev, ReceiverRecovered, now, r, 0)
	}
	if in.Closing {
		fc.event(ev, ReceiverLeft, now, r, 0)
		fc.drop(r)
	}
	return news
}

// find returns the slot holding id, or nil.
func (fc *flowController) find(id uint64) *rcvSlot {
	if fc.active == 0 {
		return nil
	}
	for i := range fc.hi {
		if r := &fc.rcv[i]; r.used && r.info.ID == id {
			return r
		}
	}
	return nil
}

// slotFor returns the index of the slot a new id from addr takes (−1:
// none): the slot of a known
// receiver at the same address (a restart: one slot per address), else a
// free one, else the least recently heard receiver that never echoed a
// probe (the caller evicts it), else nil. A receiver proves itself by
// echoing one of the sender's probes, which it is sent on joining: a
// flood of Status frames from forged ids and addresses, which never
// echo, then takes only unproven slots and cannot lock real receivers
// out of a full table. Every slot from hi on is free, so the first free
// one is below hi or hi itself.
func (fc *flowController) slotFor(addr netip.AddrPort) int {
	free, stale := -1, -1
	for i := range fc.hi {
		r := &fc.rcv[i]
		switch {
		case r.used && sameAddr(r.info.Addr, addr):
			return i
		case !r.used:
			if free < 0 {
				free = i
			}
		case !r.proven && (stale < 0 || r.info.LastHeard < fc.rcv[stale].info.LastHeard):
			stale = i
		}
	}
	if free < 0 && fc.hi < len(fc.rcv) {
		free = fc.hi
	}
	if free >= 0 {
		return free
	}
	return stale
}

// drop frees slot r, and lowers hi past the free slots at the top.
func (fc *flowController) drop(r *rcvSlot) {
	*r = rcvSlot{}
	fc.active--
	for fc.hi > 0 && !fc.rcv[fc.hi-1].used {
		fc.hi--
	}
}

// event queues a change of receiver r on ev.
func (fc *flowController) event(ev *eventQueue[SenderEvent], k SenderEventKind, now int64, r *rcvSlot, prev uint64) {
	e := SenderEvent{Kind: k, At: now, Receiver: r.info, PrevID: prev}
	e.Receiver.Throttles = false
	if !ev.push(e, 0) {
		fc.stats.EventsDropped++
		return
	}
	switch k {
	case ReceiverJoined, ReceiverRestarted:
		fc.stats.ReceiversJoined++
	case ReceiverLost:
		fc.stats.ReceiversLost++
	}
}

// fold recomputes, from the table, which receivers throttle and the
// limit they impose (sent is the highest seq sent), the tail-probe
// coverage and the retransmit dedup window, which it returns. It is the
// one place the receivers' edges are combined.
func (fc *flowController) fold(sent uint64) (dedup int64) {
	was, wasLimited := fc.limit, fc.limited
	fc.limited, fc.limit = false, math.MaxUint64
	fc.covered = math.MaxUint64
	dedup = int64(fc.cfg.RetxDedupWindow)
	group := fc.groupDedup()
	if group {
		dedup = math.MaxInt64
	}
	for i := range fc.hi {
		r := &fc.rcv[i]
		if !r.used {
			continue
		}
		in := &r.info
		live := in.State == Live && !in.Closing
		// A receiver behind what was already sent (an early burst before
		// its first Status, a reset after a catch-up) still throttles
		// while the records it lacks are in the hot ring: it repairs them
		// by NAK and the sender waits. Further behind, repairing it is
		// TCP's job, and the producer is not held for it.
		in.Throttles = live && in.Synced && !in.Stalled && in.Edge+uint64(fc.cfg.RingSlots) >= sent && fc.counts(in.ID)
		if in.Throttles {
			fc.limit = fc.combine(!fc.limited, fc.limit, fc.repairableEdge(in))
			fc.limited = true
		}
		if live && in.Highest < fc.covered {
			fc.covered = in.Highest
		}
		if in.ReNak > 0 && in.ReNak/2 < dedup {
			dedup = in.ReNak / 2 // below every receiver's re-NAK delay
		}
	}
	if group && dedup == math.MaxInt64 {
		dedup = int64(fc.cfg.RetxDedupWindow) // no receiver said its re-NAK delay
	}
	if !fc.limited || !wasLimited || fc.limit > was {
		fc.blockedAt = 0 // the window moved: nobody is holding the sender
	}
	return dedup
}

// repairableEdge is the highest seq the sender may assign for receiver
// in: its edge, and for a sender without a log at most RingSlots past
// what it delivered. Retransmits then come from the hot ring only, so a
// receiver granting a wider window (ReorderSlots > RingSlots) would let
// the sender run more than RingSlots past a gap it can no longer repair
// (ColdRejected: the receiver faults). Delivered never moves back within
// one receiver id, so neither does this edge.
func (fc *flowController) repairableEdge(in *ReceiverInfo) uint64 {
	if fc.hasLog {
		return in.Edge
	}
	return min(in.Edge, in.Delivered+uint64(fc.cfg.RingSlots))
}

// holds reports whether flow control refuses seq next now: it lies
// beyond the limit, or before any Status beyond the initial window.
func (fc *flowController) holds(next uint64, now int64) bool {
	if fc.limited && next > fc.limit {
		return true
	}
	if !fc.negotiated && fc.initial.holds(next, now) {
		fc.stats.InitialHeld++
		return true
	}
	return false
}

// nak notes a NAK: before any Status, it tells the initial window that
// the receiver hears the stream.
func (fc *flowController) nak(now int64) {
	if !fc.negotiated {
		fc.initial.nak(now)
	}
}

// refused counts a Send held back and starts the stall clock (see
// ReceiverStalled).
func (fc *flowController) refused(now int64) {
	fc.stats.Backpressured++
	if fc.negotiated && fc.blockedAt == 0 {
		fc.blockedAt = max(now, 1)
	}
}

// tick drops receivers silent for ReceiverTimeout and releases those that
// stalled the sender, queueing their events on ev; next is the Sender's
// next seq. It reports whether the table changed (the caller folds it
// again).
func (fc *flowController) tick(now int64, next uint64, ev *eventQueue[SenderEvent]) (changed bool) {
	for i := range fc.hi {
		r := &fc.rcv[i]
		if r.used && now-r.info.LastHeard >= int64(fc.cfg.ReceiverTimeout) {
			fc.event(ev, ReceiverLost, now, r, 0)
			fc.drop(r)
			changed = true
		}
	}
	if fc.blockedAt != 0 && now-fc.blockedAt >= int64(fc.cfg.ReceiverTimeout) {
		// Held back for ReceiverTimeout by receivers that delivered
		// nothing meanwhile: the producer is not their hostage. A
		// receiver still repairing a gap (it knows of seqs past what it
		// delivered) is left to its own budgets: its retry budget or
		// silence rule ends in a sticky state, which releases it, while a
		// repair the loaded machine merely delayed goes on (releasing it
		// could let the sender run past its window and the receiver
		// raise Reconnect).
		for i := range fc.hi {
			if r := &fc.rcv[i]; r.used && r.info.Throttles && r.info.Edge < next && r.info.Highest <= r.info.Delivered {
				r.info.Stalled = true
				fc.event(ev, ReceiverStalled, now, r, 0)
				changed = true
			}
		}
		fc.blockedAt = 0
	}
	return changed
}

// deadline lowers d to the next receiver timeout or stall release.
func (fc *flowController) deadline(d int64) int64 {
	for i := range fc.hi {
		if r := &fc.rcv[i]; r.used {
			d = min(d, r.info.LastHeard+int64(fc.cfg.ReceiverTimeout))
		}
	}
	if fc.blockedAt != 0 {
		d = min(d, fc.blockedAt+int64(fc.cfg.ReceiverTimeout))
	}
	return d
}

// uncovered reports whether some live negotiated receiver has not yet
// reported the highest seq sent (next−1).
func (fc *flowController) uncovered(next uint64) bool {
	return fc.active > 0 && next > 1 && fc.covered < next-1
}

// Limit returns the highest seq Send may assign now and whether flow
// control limits it at all (false: unthrottled, edge is MaxUint64).
func (s *Sender) Limit() (edge uint64, limited bool) {
	if !s.fc.limited {
		return math.MaxUint64, false
	}
	return s.fc.limit, true
}

// Receivers copies the flow-control table (receivers heard from and not
// yet dropped) into dst and returns how many it copied.
func (s *Sender) Receivers(dst []ReceiverInfo) int {
	n := 0
	for i := range s.fc.hi {
		if n == len(dst) {
			break
		}
		if r := &s.fc.rcv[i]; r.used {
			dst[n] = r.info
			n++
		}
	}
	return n
}
