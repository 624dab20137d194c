package protocol

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// The group behaviours that keep a loaded multicast group out of a NAK
// storm: a receiver behind on its input defers its NAKs until
// it has read it; a group receiver's re-NAK delay follows the repair
// latency it measures, beyond NakDebounce; the sender's dedup window
// follows the group's re-NAK delays. Unicast receivers and a sender with
// one receiver keep the reference timing (TestGroupOfOneIsUnicast, the
// trace tests).

// TestGroupBacklogHoldsNaks: a group receiver told that datagrams wait
// unread makes no NAK, however late its timers are, until it has read
// them; the repair among them then needs no NAK at all. The hold ends
// after NakDebounce of continuous backlog. A unicast receiver ignores it.
func TestGroupBacklogHoldsNaks(t *testing.T) {
	r, out := inGroup(t, 1)
	now := int64(1000)
	r.SetBacklog(true, now)
	r.Handle(dataFrame(4), now, out, nop) // 2, 3 missing
	late := now + 10*r.backoffLimit() + 10*r.renakDelay(1)
	if late-now >= int64(r.cfg.NakDebounce) {
		t.Fatalf("test needs its late tick within NakDebounce: %d ≥ %d", late-now, r.cfg.NakDebounce)
	}
	r.Tick(late, out)
	if n := naks(out); len(n) != 0 {
		t.Fatalf("NAKed with input unread: %+v", n)
	}
	if r.Stats().BacklogHolds == 0 {
		t.Fatal("no backlog hold counted")
	}
	// The rest of the backlog holds the repairs.
	r.Handle(dataFrame(2), late, out, nop)
	r.SetBacklog(false, late)
	r.Handle(dataFrame(3), late, out, nop)
	r.Tick(late+int64(r.cfg.NakDebounce), out)
	if n := naks(out); len(n) != 0 || r.ExpectedSeq() != 5 {
		t.Fatalf("NAKs %+v, expected %d: the repairs were in the backlog", n, r.ExpectedSeq())
	}

	// A backlog that never ends holds NAKs for NakDebounce only.
	r2, out2 := inGroup(t, 1)
	r2.SetBacklog(true, now)
	r2.Handle(dataFrame(4), now, out2, nop)
	r2.Tick(now+int64(r2.cfg.NakDebounce)-1, out2)
	if n := naks(out2); len(n) != 0 {
		t.Fatalf("NAKed within NakDebounce of backlog: %+v", n)
	}
	r2.SetBacklog(true, now+int64(r2.cfg.NakDebounce))
	r2.Tick(now+int64(r2.cfg.NakDebounce), out2)
	if n := naks(out2); len(n) != 1 || n[0] != (wire.Nak{From: 2, Count: 2}) {
		t.Fatalf("after NakDebounce of backlog: %+v", n)
	}

	// Unicast: the reference's timing, backlog or not.
	u, err := NewReceiver(DefaultReceiverConfig())
	if err != nil {
		t.Fatal(err)
	}
	uout := batch.New(64, 2048)
	u.Handle(dataFrame(1), now, uout, nop)
	u.SetBacklog(true, now)
	u.Handle(dataFrame(4), now, uout, nop)
	if n := naks(uout); len(n) != 1 || u.Stats().BacklogHolds != 0 {
		t.Fatalf("unicast receiver with a backlog: NAKs %+v, holds %d", n, u.Stats().BacklogHolds)
	}
}

// slowRepairs drives receiver r through gaps whose repair comes lat ns
// after the gap is seen (a loaded host: the sender or this receiver not
// run), ticking every 100 µs, and returns the NAKs each gap cost. peer,
// when set, keeps another receiver's Status coming (a group).
func slowRepairs(t *testing.T, r *Receiver, gaps int, lat int64, peer bool) []int {
	t.Helper()
	out := batch.New(64, 2048)
	now := int64(1_000_000)
	seq := r.ExpectedSeq()
	var per []int
	for g := range gaps {
		if peer {
			r.Handle(statusFrame(wire.Status{ReceiverID: testPeerID, Serial: uint32(g + 2), Window: 1024, Flags: wire.StatusSynced}), now, out, nop)
			out.Reset()
		}
		r.Handle(dataFrame(seq+1), now, out, nop) // seq missing
		k := len(naks(out))
		for at := now + 100_000; at < now+lat; at += 100_000 {
			r.Tick(at, out)
			k += len(naks(out))
		}
		r.Handle(dataFrame(seq), now+lat, out, nop)
		out.Reset()
		if r.ExpectedSeq() != seq+2 || r.Outcome().Kind != Live {
			t.Fatalf("gap %d: expected %d, outcome %v", g, r.ExpectedSeq(), r.Outcome().Err())
		}
		per = append(per, k)
		seq += 2
		now += lat + 5_000_000
	}
	return per
}

// TestGroupReNakFollowsRepairLatency: repairs take 20 ms (10× NakDebounce
// here) on a loaded group. A group receiver's re-NAKs keep doubling past
// NakDebounce and its RTT samples (from a run's first NAK) teach it the
// repair latency, so after a few gaps each costs one NAK, or two; a
// unicast receiver keeps the reference timing: a re-NAK every
// NakDebounce.
func TestGroupReNakFollowsRepairLatency(t *testing.T) {
	const lat = 20_000_000
	cfg := func(group bool) *Receiver {
		rc := DefaultReceiverConfig()
		rc.NakDebounce, rc.ID = 2_000_000, 1
		if group {
			rc.Sender = testControl
		}
		r, err := NewReceiver(rc)
		if err != nil {
			t.Fatal(err)
		}
		out := batch.New(64, 2048)
		if group {
			r.Handle(statusFrame(wire.Status{ReceiverID: testPeerID, Serial: 1, Window: 1024, Flags: wire.StatusSynced}), 10, out, nop)
		}
		r.Handle(probeFrame(wire.Probe{TS: 1, SenderID: 7, SRTT: 100_000, RTTVar: 25_000}), 10, out, nop)
		r.Handle(dataFrame(1), 10, out, nop)
		return r
	}
	g := cfg(true)
	per := slowRepairs(t, g, 40, lat, true)
	last := 0
	for _, k := range per[30:] {
		last += k
	}
	t.Logf("group: NAKs per gap %v; re-NAK delay %v ns, %d samples from first NAKs", per, g.renakDelay(1), g.Stats().GroupRTTSamples)
	if float64(last)/10 > 1.5 || per[0] > 10 {
		t.Errorf("group receiver: NAKs per gap %v (want the first ≤ 10, the last 10 ≤ 1.5 on average)", per)
	}
	if d := g.renakDelay(1); d <= int64(g.cfg.NakDebounce) {
		t.Errorf("group re-NAK delay %d ns did not grow past NakDebounce %d", d, g.cfg.NakDebounce)
	}

	u := cfg(false)
	uper := slowRepairs(t, u, 10, lat, false)
	t.Logf("unicast: NAKs per gap %v", uper)
	for _, k := range uper {
		if int64(k) < lat/int64(u.cfg.NakDebounce)-1 {
			t.Fatalf("unicast receiver: NAKs per gap %v, want one per NakDebounce (%d)", uper, lat/u.cfg.NakDebounce)
		}
	}
	if u.Stats().GroupRTTSamples != 0 || u.renakDelay(1) > int64(u.cfg.NakDebounce) {
		t.Errorf("unicast receiver took group samples (%d) or its re-NAK delay %d passed NakDebounce", u.Stats().GroupRTTSamples, u.renakDelay(1))
	}
}

// TestGroupSenderDedup: with several receivers of a group, a seq is
// retransmitted once per half the shortest re-NAK delay the receivers
// report (here 40 ms), not once per RetxDedupWindow (1 ms): another
// receiver's NAK 5 ms after the repair went to the group is answered by
// that repair. After the window a NAK is served again (its repair was
// lost). With one receiver the window is unicast's.
func TestGroupSenderDedup(t *testing.T) {
	const reNak = 40_000_000
	for _, c := range []struct {
		receivers int
		servedAt5 bool
	}{{2, false}, {1, true}} {
		sc := DefaultSenderConfig()
		sc.Dest, sc.AcceptAnyNakSource = netip.MustParseAddrPort("239.0.0.1:3000"), true
		s, out := newTestSender(t, sc, nil)
		sendN(t, s, out, 10)
		from := func(i int) netip.AddrPort {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)}), 2000)
		}
		for i := range c.receivers {
			st := wire.Status{ReceiverID: uint64(20 + i), Delivered: 4, Highest: 10, Window: 1000, ReNak: reNak, Serial: 1, Flags: wire.StatusSynced}
			s.Handle(statusFrame(st), from(i), 1, out)
		}
		out.Reset()
		t0 := int64(1_000_000)
		s.Handle(groupNakFrame(5, 1, 20), from(0), t0, out)
		s.Handle(groupNakFrame(5, 1, uint64(20+c.receivers-1)), from(c.receivers-1), t0+5_000_000, out)
		st := s.Stats()
		if served := st.RetxHot == 2; served != c.servedAt5 {
			t.Errorf("%d receivers: NAK 5 ms after the repair served %v (retransmits %d, dedup %d), want %v",
				c.receivers, served, st.RetxHot, st.RetxDedup, c.servedAt5)
		}
		s.Handle(groupNakFrame(5, 1, 20), from(0), t0+reNak/2+1, out)
		if got := s.Stats().RetxHot - st.RetxHot; got != 1 {
			t.Errorf("%d receivers: a NAK after the window got %d retransmits, want 1", c.receivers, got)
		}
	}
}

// TestGroupLoadedReceivers: 8 receivers, 1 % independent loss each and
// 0.5 % upstream (shared by all), each receiver not run for 0, 5, 10 or
// 15 ms of every 20 ms (drawn per window; the link is 50 µs): on waking
// it finds up to 1,500 datagrams queued, repairs and other receivers'
// NAKs among them, and its timers long expired. Every receiver still
// gets every record once, in order, with about one NAK per lost-record
// event and one repair per lost seq.
func TestGroupLoadedReceivers(t *testing.T) {
	const records = 20_000
	stall := func(i int, now int64) bool {
		w := now / 20_000_000
		return now%20_000_000 < int64(mix64(uint64(w)<<8|uint64(i))%4)*5_000_000
	}
	h := newGroupHarness(t, groupOpt{n: 8, latency: 50 * time.Microsecond, loss: 0.01, shared: 0.005, seed: 5, stall: stall})
	h.run(records, 1, 10*time.Microsecond, 60*time.Second)
	h.check(records)
	ev, npe, rpl := h.figures()
	holds := uint64(0)
	for _, r := range h.rs {
		holds += r.Stats().BacklogHolds
	}
	t.Logf("%d lost-record events, %.2f NAK frames/event, %.2f repairs/lost seq, %d backlog holds, worst p99 %v",
		ev, npe, rpl, holds, time.Duration(slices.Max(mapSlice(h.lat, func(l []int64) int64 { return p99(l) }))))
	if npe > 1.5 || rpl > 1.2 || holds == 0 {
		t.Errorf("NAK frames/event %.2f (want ≤ 1.5), repairs/lost seq %.2f (want ≤ 1.2), %d backlog holds", npe, rpl, holds)
	}
}
