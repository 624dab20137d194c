package protocol

import (
	"slices"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
)

// retxRig is a retransmitter over an 8-slot hot ring holding seqs 5 …
// 12 (next 13), driven directly on a virtual clock.
type retxRig struct {
	t     retransmitter
	ring  hotRing
	em    emitter
	stats SenderStats
}

func newRetxRig(hasLog bool, dedup int64) *retxRig {
	cfg := senderCfg()
	cfg.RingSlots = 8
	cfg = cfg.withDefaults()
	g := &retxRig{ring: newHotRing(8, cfg.MaxFrame), em: emitter{dest: mem.AddrB, maxFrame: cfg.MaxFrame}}
	for seq := uint64(1); seq <= 12; seq++ {
		g.ring.put(seq, frame(seq, 8))
	}
	g.t = retransmitter{cold: newColdQueue(cfg, hasLog, &g.stats), dedup: dedup,
		deferred: make([]retxRange, 0, maxDeferred), stats: &g.stats}
	return g
}

func (g *retxRig) serve(from, end uint64, now int64, out *batch.Vec) {
	g.t.serve(&g.ring, &g.em, from, end, 13, now, out)
}

func (g *retxRig) drain(now int64, out *batch.Vec) { g.t.drain(&g.ring, &g.em, 13, now, out) }

// TestRetransmitter: hot hits go out once per dedup window, misses and
// seqs older than the ring become cold requests (rejected without a
// log), and ranges that find the batch full wait, in NAK order, for a
// later drain.
func TestRetransmitter(t *testing.T) {
	t.Run("hot hits and the dedup window", func(t *testing.T) {
		g := newRetxRig(true, 100)
		out := batch.New(16, 2048)
		for _, st := range []struct {
			now        int64
			from, end  uint64
			want       string
			hot, dedup uint64
		}{
			{0, 6, 9, "[6] [7] [8]", 3, 0},
			{50, 7, 10, "[9]", 4, 2},
			{100, 6, 8, "[6] [7]", 6, 2},
		} {
			out.Reset()
			g.serve(st.from, st.end, st.now, out)
			if got := layout(t, out); got != st.want || g.stats.RetxHot != st.hot || g.stats.RetxDedup != st.dedup {
				t.Fatalf("t=%d: sent %s (hot %d, dedup %d); want %s (%d, %d)", st.now, got, g.stats.RetxHot, g.stats.RetxDedup, st.want, st.hot, st.dedup)
			}
		}
	})
	for _, c := range []struct {
		name             string
		hasLog           bool
		queued, rejected uint64
		wantCold         []ColdRequest
	}{
		{"misses become cold requests", true, 1, 0, []ColdRequest{{From: 2, Count: 3}}},
		{"without a log they are rejected", false, 0, 3, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newRetxRig(c.hasLog, 100)
			out := batch.New(16, 2048)
			g.serve(2, 7, 0, out) // 2..4 are older than the ring
			if got := layout(t, out); got != "[5] [6]" {
				t.Fatalf("hot %s, want [5] [6]", got)
			}
			reqs := make([]ColdRequest, 4)
			n := g.t.cold.take(reqs)
			if g.stats.ColdQueued != c.queued || g.stats.ColdRejected != c.rejected || n != len(c.wantCold) || (n > 0 && reqs[0] != c.wantCold[0]) {
				t.Fatalf("queued %d rejected %d, requests %v; want %d %d %v", g.stats.ColdQueued, g.stats.ColdRejected, reqs[:n], c.queued, c.rejected, c.wantCold)
			}
		})
	}
	t.Run("deferred ranges keep NAK order", func(t *testing.T) {
		g := newRetxRig(true, 0)
		out := batch.New(2, 2048)
		g.serve(5, 9, 0, out)
		g.serve(11, 13, 0, out) // queues behind, though it would not fit either
		if got := layout(t, out); got != "[5] [6]" || !g.t.pending() || g.stats.RetxDeferred != 2 {
			t.Fatalf("sent %s, pending %v, deferred %d", got, g.t.pending(), g.stats.RetxDeferred)
		}
		var sent []string
		for g.t.pending() {
			out.Reset()
			g.drain(1, out)
			sent = append(sent, layout(t, out))
		}
		if got := sent; len(got) != 2 || got[0] != "[7] [8]" || got[1] != "[11] [12]" {
			t.Fatalf("drains sent %q, want [7] [8], then [11] [12]", got)
		}
	})
	t.Run("at most maxDeferred ranges wait", func(t *testing.T) {
		g := newRetxRig(true, 0)
		out := batch.New(1, 2048)
		out.Append(nakFrame(1, 1), mem.AddrB)
		g.serve(5, 8, 0, out)
		for k := range uint64(maxDeferred) { // apart: none covers or adjoins another
			g.serve(20+2*k, 21+2*k, 0, out)
		}
		if len(g.t.deferred) != maxDeferred || g.stats.RetxDropped != 1 {
			t.Fatalf("%d deferred, %d seqs dropped; want %d, 1", len(g.t.deferred), g.stats.RetxDropped, maxDeferred)
		}
	})
	t.Run("a NAK for waiting seqs adds nothing", func(t *testing.T) {
		g := newRetxRig(true, 0)
		out := batch.New(1, 2048)
		out.Append(nakFrame(1, 1), mem.AddrB)
		for range 10 * maxDeferred { // a flood of one NAK
			g.serve(6, 10, 0, out)
		}
		g.serve(5, 8, 0, out)   // 5 joins the waiting range
		g.serve(11, 12, 0, out) // a real loss
		g.serve(8, 12, 0, out)  // 10 joins 6…9
		if got, want := g.t.deferred, []retxRange{{5, 11}, {11, 12}}; !slices.Equal(got, want) || g.stats.RetxDropped != 0 {
			t.Fatalf("waiting %v, %d seqs dropped; want %v, none", got, g.stats.RetxDropped, want)
		}
		var sent string
		for g.t.pending() {
			out.Reset()
			g.drain(1, out)
			sent += layout(t, out)
		}
		if sent != "[5][6][7][8][9][10][11]" {
			t.Fatalf("drains sent %s, want 5…11 once each", sent)
		}
	})
}
