package protocol

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// descheduled is a loaded host's schedule for n receiver loops: each, on
// its own, runs for a span drawn uniformly from run, then is not run for
// one drawn from off, over and over. stall reports whether receiver i is
// not run at now; receiver i's schedule depends only on seed and i, so a
// receiver alone can be given exactly one group member's.
func descheduled(n int, seed uint64, horizon time.Duration, run, off [2]time.Duration) func(i int, now int64) bool {
	spans := make([][]int64, n) // per receiver: start, end, start, end, … of the spans not run
	draw := func(rng *rand.Rand, r [2]time.Duration) int64 { return int64(r[0]) + rng.Int64N(int64(r[1]-r[0])+1) }
	for i := range n {
		rng := rand.New(rand.NewPCG(seed, 1000+uint64(i)))
		for at := rng.Int64N(int64(run[1])); at < int64(horizon); {
			at += draw(rng, run)
			end := at + draw(rng, off)
			spans[i] = append(spans[i], at, end)
			at = end
		}
	}
	return func(i int, now int64) bool {
		k, found := slices.BinarySearch(spans[i], now)
		if found {
			return k%2 == 0 // at a span's start: not run; at its end: runs
		}
		return k%2 == 1
	}
}

// repairClock measures, per receiver of a group harness, each gap's
// repair latency: from the time the receiver read the first datagram
// beyond a seq it never got (the gap detected, which takes it being run)
// to the time that seq was delivered. A loss at the tail, found by a
// heartbeat, is not counted.
type repairClock struct {
	h       *groupHarness
	highest []uint64           // per receiver: highest data seq read
	gapAt   []map[uint64]int64 // per receiver: seq → when its gap was detected
}

func newRepairClock(h *groupHarness) *repairClock {
	c := &repairClock{h: h, highest: make([]uint64, len(h.rs)), gapAt: make([]map[uint64]int64, len(h.rs))}
	for i := range c.gapAt {
		c.gapAt[i] = map[uint64]int64{}
	}
	h.heard = func(i int, b []byte, now int64) {
		for len(b) > 0 {
			hd, p, n, err := wire.DecodeFrame(b)
			if err != nil {
				return
			}
			b = b[n:]
			if wire.UDPControl(hd.Type) || len(p) < 8 {
				continue
			}
			if seq := wire.Seq(p); seq > c.highest[i] {
				for s := c.highest[i] + 1; s < seq; s++ {
					c.gapAt[i][s] = now
				}
				c.highest[i] = seq
			}
		}
	}
	return c
}

// latencies are receiver i's repair latencies (ns), once the run is over:
// a seq's delivery time is its send time plus its send → deliver latency.
func (c *repairClock) latencies(i int) []int64 {
	var out []int64
	for seq, at := range c.gapAt[i] {
		if seq-1 < uint64(len(c.h.lat[i])) {
			out = append(out, c.h.sentAt[seq]+c.h.lat[i][seq-1]-at)
		}
	}
	return out
}

// TestGroupDescheduledRepairLatency: 8 multicast receivers, each
// descheduled on its own as 9 busy loops on 2 vCPUs would be (run 1–5 ms,
// then not run 1–20 ms: about two ninths of the time on a CPU), with loss.
// The group's repair latency (gap detected → delivered) p99 is at most 2×
// that of a receiver alone under the same deschedule pattern and the same
// loss: each member's twin, a unicast receiver given the member's
// schedule, the same independent loss rate and the group's upstream
// losses, pooled; and its p50 within 3× (the back-off a group pays by
// design: a few path round trips). The clock is virtual, so the ratios
// are the same on every machine.
//
// What it guards: the group's NAK timers follow a round trip, and on a
// loaded host every round trip sampled carries someone's time off the
// CPU. Drawn on the sender's estimate (every member's echoes), the
// back-off would put a receiver's first NAK past its next deschedule,
// and the re-NAK timer would make a repair lost on its own link wait
// many round trips where a receiver alone asks again at once. So the
// back-off follows the path's shortest round trip, and a group
// receiver's timers its own estimate.
func TestGroupDescheduledRepairLatency(t *testing.T) {
	const (
		n       = 8
		records = 20_000
		seed    = 7
	)
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		shared   float64
		run, off [2]time.Duration
	}{
		{"1% independent loss", 0, [2]time.Duration{ms, 5 * ms}, [2]time.Duration{ms, 20 * ms}},
		{"1% independent, 0.5% shared", 0.005, [2]time.Duration{ms, 5 * ms}, [2]time.Duration{ms, 20 * ms}},
		{"shorter runs (0.2–2 ms), shared loss", 0.005, [2]time.Duration{ms / 5, 2 * ms}, [2]time.Duration{ms, 20 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stall := descheduled(n, seed, 5*time.Minute, tc.run, tc.off)
			opt := groupOpt{n: n, latency: 50 * time.Microsecond, loss: 0.01, shared: tc.shared, seed: seed, stall: stall}
			h := newGroupHarness(t, opt)
			gc := newRepairClock(h)
			h.run(records, 1, 20*time.Microsecond, 5*time.Minute)
			h.check(records)
			var group, alone [][]int64
			for i := range n {
				group = append(group, gc.latencies(i))
				o := opt
				o.n, o.unicast, o.shared, o.seed = 1, true, 0, seed+uint64(i)*7919
				o.stall = func(_ int, now int64) bool { return stall(i, now) }
				o.dropFirst = func(_ int, seq uint64) bool { return h.shared[seq] } // the group's upstream losses
				u := newGroupHarness(t, o)
				uc := newRepairClock(u)
				u.run(records, 1, 20*time.Microsecond, 5*time.Minute)
				u.check(records)
				alone = append(alone, uc.latencies(0))
			}
			ev, npe, rpl := h.figures()
			at := func(q int) (g, a time.Duration) {
				return time.Duration(quantile(q, group...)), time.Duration(quantile(q, alone...))
			}
			g50, a50 := at(500)
			g90, a90 := at(900)
			g99, a99 := at(990)
			t.Logf("repair latency, group vs alone: p50 %v / %v, p90 %v / %v, p99 %v / %v = %.2f× (%d and %d gaps); %d lost-record events, %.2f NAK frames/event, %.2f repairs/lost seq",
				g50, a50, g90, a90, g99, a99, float64(g99)/float64(a99), len(slices.Concat(group...)), len(slices.Concat(alone...)), ev, npe, rpl)
			if g99 > 2*a99 {
				t.Errorf("group repair latency p99 %v is over 2× a receiver's alone (%v)", g99, a99)
			}
			if g50 > 3*a50 {
				t.Errorf("group repair latency p50 %v is over 3× a receiver's alone (%v): more than the back-off's few path round trips", g50, a50)
			}
			if npe > 1.5 || rpl > 1.2 {
				t.Errorf("NAK frames/event %.2f (want ≤ 1.5), repairs/lost seq %.2f (want ≤ 1.2): suppression gave way", npe, rpl)
			}
		})
	}
}

// quantile is the q‰ value of vs together (nearest rank), 0 when empty.
func quantile(q int, vs ...[]int64) int64 {
	w := slices.Concat(vs...)
	if len(w) == 0 {
		return 0
	}
	slices.Sort(w)
	return w[min(len(w)-1, len(w)*q/1000)]
}
