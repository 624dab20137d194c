package protocol

import (
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// TestReceiverZeroAllocs covers the Receiver's paths beyond the in-order
// ones of TestZeroAllocs: events raised and drained, and the loss
// detector's NAK and re-NAK passes.
func TestReceiverZeroAllocs(t *testing.T) {
	check := func(name string, f func()) {
		t.Helper()
		f() // warm up
		if n := testing.AllocsPerRun(500, f); n != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, n)
		}
	}
	out := batch.New(256, 2048)
	var sink int
	deliver := func(_ wire.Header, p []byte) { sink += len(p) }

	cfg := DefaultReceiverConfig()
	r, _ := NewReceiver(cfg)
	silence := int64(cfg.HeartbeatInterval) * int64(cfg.SilenceIntervals)
	hb := hbFrame(0)
	now := int64(0)
	check("silent, heard, NextEvent", func() {
		out.Reset()
		r.Handle(hb, now, out, deliver)
		now += silence
		r.Tick(now, out)
		for _, ok := r.NextEvent(); ok; _, ok = r.NextEvent() {
		}
	})
	if st := r.Stats(); st.PeerSilences < 500 {
		t.Fatalf("%d silences", st.PeerSilences)
	}

	// A stream losing one record in eight: first NAKs as the gaps open,
	// re-NAKs on Tick, repairs drain the ring.
	r, _ = NewReceiver(cfg)
	fs := frames(1 << 16)
	next := 0
	check("loss: NAK, re-NAK, repair", func() {
		out.Reset()
		now = lossyBlock(r, fs[next:next+64], now, cfg.NakDebounce, out, deliver)
		next += 64
		if r.ExpectedSeq() != uint64(next+1) {
			t.Fatalf("expected %d, want %d (%+v)", r.ExpectedSeq(), next+1, r.Stats())
		}
	})
	if st := r.Stats(); st.NaksSent < 500*8 {
		t.Fatalf("%d NAKs", st.NaksSent)
	}

	// A group receiver: a peer's NAK holds its own back, the back-off
	// draw and the backlog hold decide when it NAKs itself.
	g := groupReceiver(t, 1)
	g.peer.probes = true
	g.loss.rtt.Sample(int64(ms))
	gn := 0
	peerNaks := make([][]byte, 600)
	for k := range peerNaks {
		peerNaks[k] = groupNakFrame(uint64(16*k+1), 1, testPeerID)
	}
	check("group: heard NAK, back-off, backlog hold", func() {
		out.Reset()
		base := gn
		for k := 1; k < 16; k++ {
			g.Handle(fs[base+k], now, out, deliver)
		}
		g.Handle(peerNaks[base/16], now, out, deliver)
		g.SetBacklog(true, now)
		now += int64(cfg.NakDebounce) / 2
		g.Tick(now, out)
		g.SetBacklog(false, now)
		now += int64(cfg.NakDebounce) + 1
		g.Tick(now, out)
		g.Handle(fs[base], now, out, deliver)
		gn += 16
	})
	if st := g.Stats(); st.GroupNaks == 0 || st.Suppressed == 0 || st.BacklogHolds == 0 || st.NaksSent == 0 {
		t.Fatalf("group paths not taken: %+v", st)
	}
}
