package protocol

import (
	"fmt"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
)

// lossRig is a loss detector over a small window with the parts of a
// Receiver it reads, driven directly on a virtual clock.
type lossRig struct {
	l     lossDetector
	ring  reorderRing
	hole  skipHole
	peers peerSet
	peer  senderView
	stats ReceiverStats
	out   *batch.Vec
}

// newLossRig builds a rig of 8 slots, NakDebounce 1000 ns and a retry
// budget of 2, a reference sender (no probes: the timer is NakDebounce).
func newLossRig(mod func(*ReceiverConfig)) *lossRig {
	cfg := DefaultReceiverConfig()
	cfg.ReorderSlots = 8
	cfg.NakDebounce = 1000
	cfg.MaxNakRetries = 2
	if mod != nil {
		mod(&cfg)
	}
	cfg = cfg.withDefaults()
	g := &lossRig{ring: newReorderRing(cfg.ReorderSlots, 64), out: batch.New(16, 2048)}
	g.l = newLossDetector(cfg, 7, &g.stats)
	g.peers.ttl = int64(time.Second)
	return g
}

func (g *lossRig) in(expected, highest uint64) lossInput {
	return lossInput{expected: expected, highest: highest, peer: &g.peer, ring: &g.ring, hole: &g.hole, peers: &g.peers, live: true}
}

// naks returns the NAKs sent since the last call as "from+count".
func (g *lossRig) naks() []string {
	var s []string
	for _, n := range naks(g.out) {
		s = append(s, fmt.Sprintf("%d+%d", n.From, n.Count))
	}
	return s
}

// TestLossDetectorSlots: found ends a seq's NAK history but keeps what
// the group learnt until delivery; clear zeroes the slot.
func TestLossDetectorSlots(t *testing.T) {
	g := newLossRig(nil)
	full := gap{at: 5, first: 3, notBefore: 9, edge: 40, retries: 2, spent: 1, heard: true}
	g.l.gaps[3] = full
	g.l.found(3)
	if want := (gap{first: 3, notBefore: 9, edge: 40, spent: 1, heard: true}); g.l.gaps[3] != want {
		t.Fatalf("after found: %+v, want %+v", g.l.gaps[3], want)
	}
	g.l.clear(3)
	if g.l.gaps[3] != (gap{}) {
		t.Fatalf("after clear: %+v", g.l.gaps[3])
	}
}

// TestLossDetectorNextRun walks the window 14 … 19 of an 8-slot ring,
// which wraps from slot 7 to slot 0, into runs: maximal stretches of
// missing seqs with one NAK history, broken by buffered seqs and never
// covering a pending Skip's hole.
func TestLossDetectorNextRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		upper uint64
		setup func(g *lossRig)
		want  string
	}{
		{"all missing across the wrap", 19, func(*lossRig) {}, "[14 19]"},
		{"a buffered seq splits at the wrap", 19, func(g *lossRig) { g.ring.put(16, frame(16, 8)) }, "[14 15] [17 19]"},
		{"NAK history splits", 19, func(g *lossRig) { g.l.gaps[17&7] = gap{retries: 1, at: 5} }, "[14 16] [17 17] [18 19]"},
		{"one history joins across the wrap", 19, func(g *lossRig) {
			for s := uint64(15); s <= 17; s++ {
				g.l.gaps[s&7] = gap{retries: 2, at: 9}
			}
		}, "[14 14] [15 17] [18 19]"},
		{"a heard NAK's hold splits", 19, func(g *lossRig) { g.l.gaps[18&7].notBefore = 50 }, "[14 17] [18 18] [19 19]"},
		{"a Skip's hole is skipped", 20, func(g *lossRig) {
			g.hole.wait(17, 18, SkipNotice{})
			g.ring.put(19, frame(19, 8))
		}, "[14 16] [20 20]"},
		{"an empty hole only ends a run", 19, func(g *lossRig) { g.hole.wait(17, 16, SkipNotice{}) }, "[14 16] [17 19]"},
		{"nothing missing", 16, func(g *lossRig) {
			for s := uint64(14); s <= 16; s++ {
				g.ring.put(s, frame(s, 8))
			}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newLossRig(nil)
			c.setup(g)
			got := ""
			for seq := uint64(14); ; {
				start, end, ok := g.l.nextRun(seq, c.upper, &g.ring, &g.hole)
				if !ok {
					break
				}
				if got != "" {
					got += " "
				}
				got += fmt.Sprintf("[%d %d]", start, end)
				seq = end + 1
			}
			if got != c.want {
				t.Fatalf("runs %q, want %q", got, c.want)
			}
		})
	}
}

// TestLossDetectorPass follows one run through its NAKs on the virtual
// clock: the first at once, re-NAKs each NakDebounce, the NAK past the
// budget returned as a fault; a seq that arrives splits the run and the
// rest keeps its history.
func TestLossDetectorPass(t *testing.T) {
	g := newLossRig(nil)
	in := g.in(1, 4)
	steps := []struct {
		now     int64
		arrive  uint64 // seq buffered before the step (0: none)
		naks    string
		nextDue int64
		fault   bool
	}{
		{now: 0, naks: "[1+4]", nextDue: 1000}, // first, via first()
		{now: 500, naks: "[]", nextDue: 1000},
		{now: 1000, arrive: 3, naks: "[1+2 4+1]", nextDue: 2000},
		{now: 2000, naks: "[1+2]", fault: true},
	}
	for k, st := range steps {
		if st.arrive != 0 {
			g.ring.put(st.arrive, frame(st.arrive, 8))
			g.l.found(st.arrive & 7)
		}
		var from, to uint64
		var spent bool
		if k == 0 {
			spent = g.l.first(&in, 1, 4, st.now, g.out)
		} else {
			from, to, spent = g.l.pump(&in, st.now, g.out)
		}
		if got := fmt.Sprint(g.naks()); got != st.naks {
			t.Fatalf("t=%d: NAKs %s, want %s", st.now, got, st.naks)
		}
		if spent != st.fault || (st.fault && (from != 1 || to != 2)) {
			t.Fatalf("t=%d: fault %v %d..%d, want %v 1..2", st.now, spent, from, to, st.fault)
		}
		if !st.fault && g.l.nextDue != st.nextDue {
			t.Fatalf("t=%d: nextDue %d, want %d", st.now, g.l.nextDue, st.nextDue)
		}
	}
	if g.stats.NaksSent != 4 || g.stats.NearFaults != 2 || g.stats.MaxRetries != 3 || g.stats.NakRounds[3] != 1 {
		t.Fatalf("stats %+v", g.stats)
	}
}

// TestLossDetectorPassStops: a pass stops at MaxNakRunsPerPump, at a
// full batch (the NAK is counted dropped) and, when a sticky outcome is
// set, after its first NAK; in each case it is due again at once.
func TestLossDetectorPassStops(t *testing.T) {
	for _, c := range []struct {
		name    string
		runs    int
		slots   int
		live    bool
		naks    int
		dropped uint64
	}{
		{"run limit", 1, 16, true, 1, 0},
		{"full batch", 64, 1, true, 1, 1},
		{"sticky outcome", 64, 16, false, 1, 0},
		{"all due", 64, 16, true, 3, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newLossRig(func(cfg *ReceiverConfig) { cfg.MaxNakRunsPerPump = c.runs })
			g.out = batch.New(c.slots, 2048)
			for _, s := range []uint64{2, 4} { // runs 1, 3, 5
				g.ring.put(s, frame(s, 8))
			}
			in := g.in(1, 5)
			in.live = c.live
			g.l.pump(&in, 0, g.out)
			if n := len(naks(g.out)); n != c.naks || g.stats.NakDropped != c.dropped {
				t.Fatalf("%d NAKs, %d dropped; want %d, %d", n, g.stats.NakDropped, c.naks, c.dropped)
			}
			if c.naks < 3 && c.live && g.l.nextDue != 0 {
				t.Fatalf("nextDue %d, want 0 (more to do)", g.l.nextDue)
			}
		})
	}
}

// TestLossDetectorGroup: in a group the first NAK waits a back-off, a
// NAK heard from another receiver holds the seqs it covers back for a
// re-NAK delay, and the pass sends only what is then due.
func TestLossDetectorGroup(t *testing.T) {
	g := newLossRig(func(cfg *ReceiverConfig) { cfg.Sender = testControl })
	g.peers.heard(testPeerID, 0)
	in := g.in(1, 4)
	g.peer.srtt, g.peer.rttvar = int64(100*time.Microsecond), int64(50*time.Microsecond)
	rtt := g.l.roundTrip(&g.peer)
	if g.l.first(&in, 1, 4, 0, g.out) || len(g.naks()) != 0 {
		t.Fatal("a group receiver's first NAK went out at once")
	}
	bound := g.l.delay.backoff.bound(rtt)
	if g.l.size != 2 || g.l.nextDue < 0 || g.l.nextDue > bound || g.l.gaps[1].at != 0 {
		t.Fatalf("size %d, nextDue %d (bound %d), gap %+v", g.l.size, g.l.nextDue, bound, g.l.gaps[1])
	}
	g.ring.put(2, frame(2, 8))
	g.l.heard(1, 3, &g.ring, rtt, g.peer.probes, 500) // seq 2 is buffered: not held
	if g.stats.Suppressed != 2 || g.l.gaps[2].heard || !g.l.gaps[3].heard || g.l.gaps[1].notBefore != 1500 {
		t.Fatalf("suppressed %d, gaps %+v", g.stats.Suppressed, g.l.gaps[1:4])
	}
	if bound != 1000 {
		t.Fatalf("back-off bound %d, want NakDebounce", bound)
	}
	g.l.pump(&in, 1000, g.out)
	if got := fmt.Sprint(g.naks()); got != "[4+1]" {
		t.Fatalf("NAKs %s after the back-off, want [4+1] (1 and 3 held by the heard NAK)", got)
	}
	g.l.pump(&in, 1500+bound, g.out)
	if got := fmt.Sprint(g.naks()); got != "[1+1 3+1]" {
		t.Fatalf("NAKs %s after the hold, want [1+1 3+1]", got)
	}
}

// TestLossDetectorRTTSample: a record NAKed once gives one sample per
// NAK batch (Karn's rule: a run NAKed twice gives none alone).
func TestLossDetectorRTTSample(t *testing.T) {
	g := newLossRig(nil)
	in := g.in(1, 3)
	g.l.first(&in, 1, 3, 100, g.out)
	g.l.rttSample(1, 400)
	g.l.rttSample(2, 500) // same NAK batch: no second sample
	if g.l.rtt.Samples() != 1 || g.l.rtt.SRTT() != 300 {
		t.Fatalf("%d samples, srtt %d; want 1, 300", g.l.rtt.Samples(), g.l.rtt.SRTT())
	}
	g.l.pump(&in, 2000, g.out) // 3 NAKed again
	g.l.rttSample(3, 2100)
	if g.l.rtt.Samples() != 1 || g.stats.RTTSamples != 1 {
		t.Fatalf("a twice-NAKed record gave a sample: %d", g.l.rtt.Samples())
	}
}

// TestLossDetectorRTTAtDecision: the RTT a NAK decision uses is read
// after the decision took the group size: a receiver with enough round
// trips of its own that finds itself in a group draws its back-off on
// its own estimate at once, not on the sender's it used alone.
func TestLossDetectorRTTAtDecision(t *testing.T) {
	g := newLossRig(func(cfg *ReceiverConfig) { cfg.Sender, cfg.NakDebounce = testControl, 50*time.Millisecond })
	for range groupOwnSamples {
		g.l.rtt.Sample(int64(100 * time.Microsecond))
	}
	g.peer.srtt, g.peer.rttvar = int64(10*time.Millisecond), int64(time.Millisecond)
	if g.l.size != 0 || g.l.roundTrip(&g.peer).SRTT() != g.peer.srtt {
		t.Fatal("alone, the receiver's RTT is not the larger estimate")
	}
	g.peers.heard(testPeerID, 0)
	in := g.in(1, 1)
	g.l.first(&in, 1, 1, 0, g.out)
	own := backoff(7, 1, 0, 2, g.l.delay.backoff.bound(g.l.rtt))
	if g.l.nextDue != own {
		t.Fatalf("first NAK due %d, want %d (the back-off on its own estimate)", g.l.nextDue, own)
	}
	if sender := backoff(7, 1, 0, 2, g.l.delay.backoff.bound(rttOf(10*time.Millisecond))); sender == own {
		t.Fatalf("the test cannot tell the estimates apart (%d)", own)
	}
}
