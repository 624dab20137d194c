package protocol

import (
	"math"
	"net/netip"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
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

func (backpressure) Is(target error) bool { return target == wal.ErrBackpressure }

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
	info   ReceiverInfo
	serial uint32
	rtt    RTT
}

// flow is the Sender's flow-control state (one per Sender).
type flow struct {
	rcv     []rcvSlot
	active  int    // used slots
	limited bool   // some receiver throttles
	limit   uint64 // highest seq Send may assign while limited
	covered uint64 // lowest Highest among live negotiated receivers
	rtt     RTT    // all echoes of all receivers

	lastData  int64 // last first transmission
	lastProbe int64 // last probe (extended heartbeat)
	probeAt   int64 // earliest next tail probe
	backoff   uint  // tail probes sent since the last Status
	probeNow  bool  // a probe is owed at once (negotiation, NAK for unsent seqs)
	blockedAt int64 // first Send refused since the limit last moved (0: none)
	// initial window: before any Status, seqs ≤ initEdge until initUntil
	negotiated bool
	initEdge   uint64
	initUntil  int64

	events        [maxSenderEvents]SenderEvent
	evHead, evLen int
}

func (s *Sender) initFlow() {
	s.fc.rcv = make([]rcvSlot, s.cfg.MaxReceivers)
	s.fc.lastProbe = never
	s.fc.lastData = never
}

// handleStatus processes one Status frame payload from addr.
func (s *Sender) handleStatus(p []byte, from netip.AddrPort, now int64, out *batch.Vec) {
	if s.cfg.NoFlowControl {
		s.stats.Ignored++
		return
	}
	st, err := ParseStatus(p)
	if err != nil {
		s.stats.BadStatus++
		return
	}
	r := s.findReceiver(st.ReceiverID)
	if r != nil && r.used && int32(st.Serial-r.serial) <= 0 {
		r.info.LastHeard = now // reordered or duplicated: alive, but old news
		s.stats.StaleStatus++
		return
	}
	var joined SenderEventKind
	var prev uint64
	s.fc.negotiated = true
	if r == nil {
		r = s.slotFor(from)
		if r == nil {
			s.stats.StatusRejected++
			return
		}
		if r.used {
			joined, prev = ReceiverRestarted, r.info.ID
		} else {
			joined = ReceiverJoined
			s.fc.active++
		}
		*r = rcvSlot{used: true, info: ReceiverInfo{ID: st.ReceiverID, Addr: from}}
		s.fc.probeNow = true // an RTT sample, and the probe form, at once
	}
	s.stats.Statuses++
	in := &r.info
	wasState := in.State
	progressed := in.Stalled && st.Delivered > in.Delivered
	if progressed {
		in.Stalled = false
	}
	r.serial = st.Serial
	in.LastHeard = now
	in.Delivered, in.Highest, in.Window, in.State = st.Delivered, st.Highest, st.Window, st.State
	in.Synced = st.Flags&StatusSynced != 0
	in.Closing = st.Flags&StatusClosing != 0
	in.ReNak = int64(st.ReNak)
	if in.Synced {
		in.Edge = max(in.Edge, st.Edge())
	} else {
		in.Edge = 0
	}
	if st.EchoTS != 0 && int64(st.EchoTS) <= now {
		rtt := now - int64(st.EchoTS) - int64(st.EchoHold)
		r.rtt.Sample(rtt)
		s.fc.rtt.Sample(rtt)
		in.SRTT, in.RTTVar = r.rtt.SRTT(), r.rtt.RTTVar()
		if s.fc.rtt.Samples() == 1 {
			s.fc.probeNow = true // the receivers learn the first estimate at once
		}
	}
	s.fc.backoff = 0
	s.fc.probeAt = 0
	switch {
	case joined != 0:
		s.event(joined, now, r, prev)
		if in.State != Live {
			s.event(ReceiverFaulted, now, r, 0)
		}
	case wasState == Live && in.State != Live:
		s.event(ReceiverFaulted, now, r, 0)
	case wasState != Live && in.State == Live, progressed:
		s.event(ReceiverRecovered, now, r, 0)
	}
	if in.Closing {
		s.event(ReceiverLeft, now, r, 0)
		s.dropReceiver(r)
	}
	s.foldLimit()
}

// findReceiver returns the slot holding id, or nil.
func (s *Sender) findReceiver(id uint64) *rcvSlot {
	if s.fc.active == 0 {
		return nil
	}
	for i := range s.fc.rcv {
		if r := &s.fc.rcv[i]; r.used && r.info.ID == id {
			return r
		}
	}
	return nil
}

// slotFor returns the slot a new id from addr takes: the slot of a known
// receiver at the same address (a restart), else a free one, else nil.
func (s *Sender) slotFor(addr netip.AddrPort) *rcvSlot {
	var free *rcvSlot
	for i := range s.fc.rcv {
		r := &s.fc.rcv[i]
		if r.used && sameAddr(r.info.Addr, addr) {
			return r
		}
		if !r.used && free == nil {
			free = r
		}
	}
	return free
}

func (s *Sender) dropReceiver(r *rcvSlot) {
	*r = rcvSlot{}
	s.fc.active--
}

// foldLimit recomputes, from the receiver table, which receivers throttle
// and the limit they impose, the tail-probe coverage and the dedup
// window. It is the one place the receivers' edges are combined (a group
// policy other than the minimum goes here).
func (s *Sender) foldLimit() {
	fc := &s.fc
	was, wasLimited := fc.limit, fc.limited
	fc.limited, fc.limit = false, math.MaxUint64
	fc.covered = math.MaxUint64
	s.retx.dedup = s.cfg.RetxDedupWindow
	group := s.groupDedup()
	if group {
		s.retx.dedup = math.MaxInt64
	}
	sent := s.next - 1
	for i := range fc.rcv {
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
		in.Throttles = live && in.Synced && !in.Stalled && in.Edge+uint64(s.cfg.RingSlots) >= sent && s.counts(in.ID)
		if in.Throttles {
			fc.limit = s.fold(!fc.limited, fc.limit, s.repairableEdge(in))
			fc.limited = true
		}
		if live && in.Highest < fc.covered {
			fc.covered = in.Highest
		}
		if in.ReNak > 0 && in.ReNak/2 < s.retx.dedup {
			s.retx.dedup = in.ReNak / 2 // below every receiver's re-NAK delay
		}
	}
	if group && s.retx.dedup == math.MaxInt64 {
		s.retx.dedup = s.cfg.RetxDedupWindow // no receiver said its re-NAK delay
	}
	if !fc.limited || !wasLimited || fc.limit > was {
		fc.blockedAt = 0 // the window moved: nobody is holding the sender
	}
}

// repairableEdge is the highest seq the sender may assign for receiver
// in: its edge, and for a sender without a log at most RingSlots past
// what it delivered. Retransmits then come from the hot ring only, so a
// receiver granting a wider window (ReorderSlots > RingSlots) would let
// the sender run more than RingSlots past a gap it can no longer repair
// (ColdRejected: the receiver faults). Delivered never moves back within
// one receiver id, so neither does this edge.
func (s *Sender) repairableEdge(in *ReceiverInfo) uint64 {
	if s.log != nil {
		return in.Edge
	}
	return min(in.Edge, in.Delivered+uint64(s.cfg.RingSlots))
}

// initialHold reports whether the initial window holds the next seq back
// (no Status heard yet, InitialWindow records sent, InitialWait not over).
// A Sender with NoFlowControl ignores every Status, so nothing could end
// the hold before InitialWait: it has no initial window (the reference's
// behaviour).
func (s *Sender) initialHold(now int64) bool {
	fc := &s.fc
	if fc.negotiated || s.cfg.InitialWindow == 0 || s.cfg.NoFlowControl {
		return false
	}
	if fc.initUntil == 0 {
		w := uint64(s.cfg.InitialWindow)
		if s.log == nil {
			w = min(w, uint64(s.cfg.RingSlots)) // all of it repairable from the hot ring
		}
		fc.initEdge = s.next - 1 + w
		fc.initUntil = max(now, 1) + s.cfg.InitialWait
	}
	if s.next <= fc.initEdge || now >= fc.initUntil {
		return false
	}
	s.stats.InitialHeld++
	return true
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
	for i := range s.fc.rcv {
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
