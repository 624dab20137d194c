package protocol

import (
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// *wal.Writer is the Log a Sender is built for.
var (
	_ Log       = (*wal.Writer)(nil)
	_ Skipper   = (*wal.Writer)(nil)
	_ LogHealth = (*wal.Writer)(nil)
)

func openWAL(t testing.TB, dir string) *wal.Writer {
	t.Helper()
	c := wal.DefaultConfig(dir)
	c.Stream = 7
	c.SegmentSize = 256 << 10 // several segments per test
	c.BufferSize = 1 << 20
	c.FlushInterval = time.Millisecond
	c.MaxFlushLag = 10 * time.Second
	c.BlockOnBackpressure = true
	w, err := wal.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// TestWithRealWAL runs the loss scenarios with the real wal.Writer as the
// sender's log and cold-read source.
func TestWithRealWAL(t *testing.T) {
	t.Run("evicted records are served from the WAL", func(t *testing.T) {
		o := defaultOpt()
		o.s.RingSlots = 64
		o.wal = openWAL(t, t.TempDir())
		h := newHarness(t, o)
		h.r.ResetAfterReplay(0)
		h.impairData(mem.Impairment{Drop: []int{1, 2, 3, 500}})
		h.impairNaks(mem.Impairment{DropProb: 1})
		h.send(1000) // 2..4 and 501 lost, their first NAKs too
		h.step()
		h.impairNaks(mem.Impairment{})
		h.run(60*ms, ms)
		h.expectDelivered(1, 1000)
		if st := h.s.Stats(); st.RetxCold != 4 || st.RetxHot != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("sustained 10% loss", func(t *testing.T) {
		o := defaultOpt()
		o.s.RingSlots = 16  // re-NAKs (50 ms = 50 records later) go to the WAL
		o.r.NoStatus = true // reference timers: the adaptive re-NAK would find the ring
		o.wal = openWAL(t, t.TempDir())
		h := newHarness(t, o)
		h.r.ResetAfterReplay(0)
		h.impairData(mem.Impairment{Seed: 5, DropProb: 0.1})
		h.impairNaks(mem.Impairment{Seed: 6, DropProb: 0.1})
		for i := 0; i < 3000; i++ {
			h.send(1)
			h.step()
			h.p.Clock.Advance(ms)
		}
		h.run(2*time.Second, ms)
		h.expectDelivered(1, 3000)
		if st := h.s.Stats(); st.RetxCold == 0 || st.ColdMissing != 0 || st.ColdErrors != 0 {
			t.Fatalf("sender %+v", st)
		}
	})
	t.Run("restarted sender continues the WAL and serves old seqs cold", func(t *testing.T) {
		dir := t.TempDir()
		w := openWAL(t, dir)
		s, out := newTestSender(t, senderCfg(), w)
		sendN(t, s, out, 100)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w = openWAL(t, dir)
		s, out = newTestSender(t, senderCfg(), w)
		if s.NextSeq() != 101 {
			t.Fatalf("next seq after restart %d, want 101", s.NextSeq())
		}
		s.Tick(0, out) // a restarted sender announces where it stands
		if b, _ := out.Msg(0); len(b) != wire.ControlFrameSize {
			t.Fatal("no heartbeat")
		} else if hb, _ := wire.ParseHeartbeat(b[wire.HeaderSize:]); hb.Highest != 100 {
			t.Fatalf("heartbeat highest %d", hb.Highest)
		}
		out.Reset()
		s.Handle(nakFrame(50, 3), mem.AddrB, 0, out)
		var reqs [4]ColdRequest
		if n := s.ColdRequests(reqs[:]); n != 1 || reqs[0] != (ColdRequest{From: 50, Count: 3}) {
			t.Fatalf("cold requests %v", reqs[:n])
		}
		buf := make([]byte, 64<<10)
		_, nb, err := w.ReadRange(50, 3, buf)
		if err != nil {
			t.Fatal(err)
		}
		if rest := s.ColdDone(reqs[0], buf[:nb], 0, out); len(rest) != 0 {
			t.Fatal("rest")
		}
		if got := retransmitted(t, out); len(got) != 3 || got[0] != 50 || got[2] != 52 {
			t.Fatalf("retransmitted %v", got)
		}
	})
	t.Run("NAK for a seq 5000 sends back is served from the WAL, seen on the wire", func(t *testing.T) {
		w := openWAL(t, t.TempDir())
		s, out := newTestSender(t, senderCfg(), w)
		sendN(t, s, out, 5001)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		s.Handle(nakFrame(1, 1), mem.AddrB, 0, out)
		var reqs [4]ColdRequest
		n := s.ColdRequests(reqs[:])
		if n != 1 {
			t.Fatalf("%d cold requests", n)
		}
		buf := make([]byte, 4096)
		_, nb, err := w.ReadRange(reqs[0].From, reqs[0].Count, buf)
		if err != nil {
			t.Fatal(err)
		}
		s.ColdDone(reqs[0], buf[:nb], 0, out)
		if out.Len() != 1 {
			t.Fatalf("%d datagrams", out.Len())
		}
		b, to := out.Msg(0)
		hd, p, _, err := wire.DecodeFrame(b)
		if err != nil || hd.Type != 100 || wire.Seq(p) != 1 || to != mem.AddrB {
			t.Fatalf("retransmit %+v seq %d to %v: %v", hd, wire.Seq(p), to, err)
		}
	})
}

func BenchmarkSendRealWAL(b *testing.B) {
	w := openWAL(b, b.TempDir())
	s, _ := NewSender(senderCfg(), w)
	out := batch.New(64, 2048)
	p := make([]byte, 128)
	b.ReportAllocs()
	for b.Loop() {
		if out.Full() {
			out.Reset()
		}
		if _, err := s.Send(100, p, 0, out); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLargeColdPathLoss: 100 000 records at 10 % loss both ways, one per
// ms, with a 16-slot hot ring, so every re-NAK (50 ms later) is served by
// a cold read from the real WAL (index lookup, O_DIRECT read) — every
// record delivered exactly once, in order.
func TestLargeColdPathLoss(t *testing.T) {
	o := defaultOpt()
	o.s.RingSlots = 16
	o.wal = openWAL(t, t.TempDir())
	h := newHarness(t, o)
	h.r.ResetAfterReplay(0)
	h.impairData(mem.Impairment{Seed: 11, DropProb: 0.1})
	h.impairNaks(mem.Impairment{Seed: 12, DropProb: 0.1})
	const n = 100_000
	for i := 0; i < n && h.r.Outcome().Kind == Live; i++ {
		h.send(1)
		h.step()
		h.p.Clock.Advance(ms)
	}
	for i := 0; i < 100_000 && h.delivered < n && h.r.Outcome().Kind == Live; i++ {
		h.step()
		h.p.Clock.Advance(ms)
	}
	h.expectDelivered(1, n)
	st := h.s.Stats()
	t.Logf("retx hot %d cold %d (%.3f/record), cold requests %d, missing %d", st.RetxHot, st.RetxCold, float64(st.RetxHot+st.RetxCold)/n, st.ColdQueued, st.ColdMissing)
	if st.RetxCold == 0 || st.ColdMissing != 0 || st.ColdErrors != 0 {
		t.Fatalf("sender %+v", st)
	}
}
