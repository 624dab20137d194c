package protocol

import (
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// lostRepairReceiver is a negotiated unicast receiver whose RTT estimate
// (the sender's, from its probe) puts the timed re-NAK far away: 5 ms
// srtt, 1 ms rttvar, so the first re-NAK waits 9 ms. It has delivered
// seq 1 and told the sender its edge (1 + slots).
func lostRepairReceiver(t *testing.T, slots int) (*Receiver, *batch.Vec, int64) {
	t.Helper()
	c := DefaultReceiverConfig()
	c.ReorderSlots = slots
	r, err := NewReceiver(c)
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(64, 2048)
	now := int64(time.Second)
	srtt, rttvar := 5*time.Millisecond, time.Millisecond
	r.Handle(probeFrame(wire.Probe{Highest: 1, TS: 1, SenderID: 7, SRTT: uint32(srtt), RTTVar: uint32(rttvar)}), now, out, nop)
	r.Handle(dataFrame(1), now, out, nop)
	now += int64(DefaultStatusInterval)
	r.Tick(now, out)
	if r.st.lastAt != now || r.st.maxEdge != 1+uint64(slots) {
		t.Fatalf("no Status with edge %d went out (maxEdge %d)", 1+slots, r.st.maxEdge)
	}
	if d := r.NakDelay(); d != int64(srtt+4*rttvar) {
		t.Fatalf("re-NAK delay %v, want %v", time.Duration(d), srtt+4*rttvar)
	}
	out.Reset()
	return r, out, now
}

func hasNak(ns []wire.Nak, from uint64) bool {
	for _, n := range ns {
		if n.From <= from && from < n.From+n.Count {
			return true
		}
	}
	return false
}

// A repair that the sender sent before some data record is known lost as
// soon as that record arrives without it: the receiver NAKs again at
// once, not after its 9 ms re-NAK delay. "Sent before" is proven by
// order alone: the record lies beyond every edge the receiver had
// advertised when it NAKed, so the sender sent it only after it had read
// a Status sent after the NAK, i.e. after it had answered the NAK. Data
// within that edge proves nothing (it may have left before the NAK
// arrived) and triggers nothing.
func TestOrderReNakOfLostRepair(t *testing.T) {
	r, out, now := lostRepairReceiver(t, 2048)
	edge0 := r.st.maxEdge // 2049
	// 2 and 5 are lost; both NAKed at once.
	for _, s := range []uint64{3, 4, 6} {
		r.Handle(dataFrame(s), now, out, nop)
	}
	if ns := naks(out); !hasNak(ns, 2) || !hasNak(ns, 5) {
		t.Fatalf("first NAKs %v, want 2 and 5", ns)
	}
	// 2's repair arrives; 5's is lost. A Status moves the edge to 4+2048.
	now += 20_000
	r.Handle(dataFrame(2), now, out, nop)
	now += int64(DefaultStatusInterval)
	r.Tick(now, out)
	if r.st.maxEdge != 4+2048 {
		t.Fatalf("maxEdge %d after delivering 4, want %d", r.st.maxEdge, 4+2048)
	}
	if ns := naks(out); len(ns) != 0 {
		t.Fatalf("re-NAK %v before any evidence", ns)
	}
	// Data up to the edge the NAK was made under proves nothing.
	for s := uint64(7); s <= edge0; s++ {
		r.Handle(dataFrame(s), now, out, nop)
	}
	r.Tick(now, out)
	if ns := naks(out); len(ns) != 0 {
		t.Fatalf("re-NAK %v on data the sender may have sent before it read the NAK", ns)
	}
	// The first record beyond it does: 5's repair went out before it.
	now += 10_000
	r.Handle(dataFrame(edge0+1), now, out, nop)
	if ns := naks(out); len(ns) != 1 || ns[0].From != 5 || ns[0].Count != 1 {
		t.Fatalf("after data beyond the NAK's edge: NAKs %v, want exactly 5 again", ns)
	}
	if sp := r.loss.gaps[5&r.mask].spent; sp != 1 {
		t.Fatalf("the order re-NAK, sooner than the timer, spent budget: %d NAKs counted, want 1", sp)
	}
	st := r.Stats()
	if st.OrderReNaks != 1 || st.NakRounds[2] != 1 {
		t.Fatalf("OrderReNaks %d, second-round NAKs %d, want 1 and 1", st.OrderReNaks, st.NakRounds[2])
	}
	// Re-NAKed under the current edge: more data within it is quiet, and
	// the timer (doubled: second round) still backs it up.
	r.Handle(dataFrame(edge0+2), now, out, nop)
	r.Tick(now+2*r.NakDelay()-1, out)
	if ns := naks(out); len(ns) != 0 {
		t.Fatalf("NAKs %v before new evidence or the timer", ns)
	}
	r.Tick(now+2*r.NakDelay(), out)
	if ns := naks(out); !hasNak(ns, 5) {
		t.Fatalf("timer re-NAK missing: %v", ns)
	}
	if r.Outcome().Kind != Live {
		t.Fatalf("outcome %v", r.Outcome())
	}
}

// Without a negotiated sender (no probe heard: a reference sender) the
// receiver keeps the reference's fixed timers: no order re-NAK.
func TestOrderReNakNeedsNegotiation(t *testing.T) {
	r, err := NewReceiver(DefaultReceiverConfig())
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(64, 2048)
	now := int64(time.Second)
	r.Handle(dataFrame(1), now, out, nop)
	r.Handle(dataFrame(3), now, out, nop)
	naks(out)
	for s := uint64(4); s < 5000; s++ {
		r.Handle(dataFrame(s), now+int64(s), out, nop)
		if s-3 >= uint64(r.window) {
			break
		}
	}
	if ns := naks(out); len(ns) != 0 || r.Stats().OrderReNaks != 0 {
		t.Fatalf("un-negotiated: NAKs %v, OrderReNaks %d", ns, r.Stats().OrderReNaks)
	}
}

// A receiver that holds its sender at the advertised edge (everything up
// to delivered+window is known to exist; only the oldest gap's repair can
// still be in flight) re-NAKs that gap after NakFloor, doubling per
// retry, not after its RTT-based delay: its sender is idle, so a repair
// not back by then is lost far more often than late, and nothing else is
// in flight for the re-NAK to cost.
func TestPinnedReNakOfOldestGap(t *testing.T) {
	const slots = 16
	floor := int64(DefaultNakFloor)
	for _, pinned := range []bool{false, true} {
		r, out, now := lostRepairReceiver(t, slots)
		// A consumer that takes nothing more: the next Status advertises
		// no room, but the sender may still send up to the edge it had,
		// so the receiver is not pinned before it has seen all of it.
		r.SetConsumerRoom(0, now, out)
		now += int64(DefaultStatusInterval)
		r.Tick(now, out)
		if r.st.window != 0 || r.st.maxEdge != 1+slots {
			t.Fatalf("after SetConsumerRoom(0): advertised window %d, maxEdge %d", r.st.window, r.st.maxEdge)
		}
		naks(out)
		r.Handle(dataFrame(3), now, out, nop) // 2 is lost
		if ns := naks(out); !hasNak(ns, 2) {
			t.Fatalf("first NAK %v", ns)
		}
		t0 := now
		last := uint64(10)
		if pinned {
			last = 1 + slots // the whole advertised window
		}
		for s := uint64(4); s <= last; s++ {
			now += 1000
			r.Handle(dataFrame(s), now, out, nop)
		}
		r.Tick(t0+floor-1, out)
		if ns := naks(out); len(ns) != 0 {
			t.Fatalf("pinned %v: re-NAK %v before NakFloor", pinned, ns)
		}
		r.Tick(t0+floor, out)
		ns := naks(out)
		if pinned != hasNak(ns, 2) {
			t.Fatalf("pinned %v: NAKs %v at NakFloor after the first", pinned, ns)
		}
		if !pinned {
			r.Tick(t0+r.NakDelay(), out)
			if ns := naks(out); !hasNak(ns, 2) {
				t.Fatalf("unpinned: no timer re-NAK at %v: %v", time.Duration(r.NakDelay()), ns)
			}
			continue
		}
		if r.Stats().PinnedReNaks != 1 {
			t.Fatalf("PinnedReNaks %d", r.Stats().PinnedReNaks)
		}
		// The next one doubles.
		t1 := t0 + floor
		r.Tick(t1+2*floor-1, out)
		if ns := naks(out); len(ns) != 0 {
			t.Fatalf("second pinned re-NAK %v before 2·NakFloor", ns)
		}
		r.Tick(t1+2*floor, out)
		if ns := naks(out); !hasNak(ns, 2) {
			t.Fatalf("no second pinned re-NAK at 2·NakFloor: %v", ns)
		}
		// The Status says so: the sender's dedup window stays below it.
		r.Tick(t1+int64(time.Second)/100, out)
		if got := r.shortestRenak(); got != floor {
			t.Fatalf("shortest re-NAK %d, want NakFloor %d", got, floor)
		}
	}
}

// A receiver its sender no longer waits for — a heartbeat says the stream
// is far beyond the edge it advertised, so its repairs come from the log
// while the stream runs on — is not pinned, and newer data proves nothing
// about the order of repairs: it keeps the RTT timers (cold reads are slow
// and may be served in any order).
func TestReleasedReceiverKeepsTimers(t *testing.T) {
	const slots = 16
	r, out, now := lostRepairReceiver(t, slots)
	r.Handle(dataFrame(3), now, out, nop) // 2 is lost
	naks(out)
	t0 := now
	r.Handle(probeFrame(wire.Probe{Highest: 100_000, TS: 2, SenderID: 7, SRTT: 5_000_000, RTTVar: 1_000_000}), now, out, nop)
	naks(out)
	for s := uint64(4); s <= 1+slots; s++ {
		now += 1000
		r.Handle(dataFrame(s), now, out, nop)
	}
	if r.pinned() || r.rackOn() {
		t.Fatalf("released receiver: pinned %v, order rule on %v (highest %d, maxEdge %d)", r.pinned(), r.rackOn(), r.highest, r.st.maxEdge)
	}
	r.Tick(t0+int64(DefaultNakFloor), out)
	if ns := naks(out); hasNak(ns, 2) {
		t.Fatalf("re-NAK of 2 at NakFloor although the sender does not wait for this receiver: %v", ns)
	}
	if st := r.Stats(); st.PinnedReNaks+st.OrderReNaks != 0 {
		t.Fatalf("pinned %d, order %d re-NAKs", st.PinnedReNaks, st.OrderReNaks)
	}
}
