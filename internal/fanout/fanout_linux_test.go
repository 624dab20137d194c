package fanout

import (
	"context"
	"testing"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/netns"
)

func check(t *testing.T, res Result) {
	t.Helper()
	for i, rr := range res.Receivers {
		if rr.Delivered != uint64(res.Config.Records) || rr.OutOfOrder != 0 || rr.Missing != 0 {
			t.Errorf("receiver %d: delivered %d of %d, out of order %d, missing %d", i, rr.Delivered, res.Config.Records, rr.OutOfOrder, rr.Missing)
		}
	}
}

func logResult(t *testing.T, res Result) {
	t.Helper()
	t.Logf("%s %d→%d, %d records, loss %.1f%%: %.3f datagrams/record, lost events %d, NAK frames %d (%.2f/event), repairs %d (%.2f/lost seq), %.0f rec/s, load %v→%v",
		res.Config.Mode, 1, res.Config.Receivers, res.Config.Records, 100*res.Config.Loss, res.DatagramsPerRecord(), res.LostEvents,
		res.NakFrames, res.NaksPerEvent(), res.Repairs, res.RepairsPerLost(), res.Throughput, res.Load[0], res.Load[1])
	t.Logf("  sender: %+v", res.SenderStats)
	for i, rr := range res.Receivers {
		t.Logf("  r%d outcome %q naks sent %d (core) rounds %v suppressed %d group naks %d own %d rtt samples %d", i, rr.Outcome, rr.Stats.NaksSent, rr.Stats.NakRounds[:6], rr.Stats.Suppressed, rr.Stats.GroupNaks, rr.Stats.OwnNaks, rr.Stats.RTTSamples)
		t.Logf("  r%d: lost %d dropped %d naks %d repairs %d dups %d  p50 %.1f µs p99 %.1f µs max %.1f µs  udp %d tcp %d",
			i, rr.Lost, rr.Dropped, rr.NakFrames, rr.Repairs, rr.Duplicates,
			float64(rr.Latency.P50)/1e3, float64(rr.Latency.P99)/1e3, float64(rr.Latency.Max)/1e3, rr.UDP, rr.TCP)
	}
}

func TestFanoutSmoke(t *testing.T) {
	netns.Require(t)
	c := DefaultConfig()
	c.Receivers, c.Records, c.Rate, c.WAL = 3, 20_000, 10_000, true
	c.Timeout = 30 * time.Second
	res, err := Run(context.Background(), c)
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
}

func TestFanoutUnicast(t *testing.T) {
	netns.Require(t)
	c := DefaultConfig()
	c.Mode = Unicast
	c.Receivers, c.Records, c.Rate, c.WAL = 3, 10_000, 5_000, true
	c.Timeout = 60 * time.Second
	res, err := Run(context.Background(), c)
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
	if d := res.DatagramsPerRecord(); d < 3 {
		t.Errorf("unicast to 3 receivers sent %.2f datagrams per record, want ≥ 3", d)
	}
}

// TestFanoutKillRestart kills one receiver mid-stream for longer than
// the sender's ReceiverTimeout: the others get everything once and in
// order; with the min policy the sender is held until the timeout drops
// the dead receiver, then runs at full speed (catching up on its
// schedule); with max it is never held; the killed receiver comes back
// as a Consumer and catches up over TCP, every record exactly once.
func TestFanoutKillRestart(t *testing.T) {
	netns.Require(t)
	for _, pol := range []protocol.FlowPolicy{protocol.FlowMin, protocol.FlowMax} {
		t.Run(pol.String(), func(t *testing.T) {
			c := DefaultConfig()
			c.Receivers, c.Records, c.Rate = 3, 60_000, 20_000
			c.WAL, c.Kill, c.KillAt, c.Down, c.Policy = true, 1, 10_000, 2*time.Second, pol
			c.ReceiverTimeout = protocol.DefaultReceiverTimeout // dropped within Down
			if pol == protocol.FlowMin {
				// A 4096-record window is 0.2 s at 20 000 rec/s: the sender
				// reaches the dead receiver's edge long before the 1 s
				// ReceiverTimeout drops it, so min must hold it ≈ 0.8 s.
				// (max never waits for anyone but the fastest: the others
				// keep the default window, so a loaded machine's stalls do
				// not push them out of it.)
				c.ReorderSlots = 4096
			} else {
				// max holds the sender for nobody but the fastest: the
				// others must keep up by themselves, which under -race
				// (cores 5-20x slower) they cannot at 20 000 rec/s — they
				// fall out of the hot ring and fault on the retry budget.
				c.Rate /= raceSlowdown
			}
			c.Timeout = 2 * time.Minute
			res, err := Run(context.Background(), c)
			logResult(t, res)
			t.Logf("lost after %v, stall %v, then %.0f rec/s; %.0f rec/s before the kill, %.0f until the receiver was lost; it had delivered %d, %d produced when lost",
				res.LostAfter, res.Stall, res.ResumeRate, res.PreRate, res.HeldRate, res.KilledDelivered, res.ProducedAtLost)
			if err != nil {
				t.Fatal(err)
			}
			check(t, res)
			if k := res.Receivers[1]; !k.Killed || k.TCP == 0 {
				t.Errorf("receiver 1: killed %v, %d records over TCP", k.Killed, k.TCP)
			}
			for i, rr := range res.Receivers {
				if i != 1 && (rr.Outcome != "" || !rr.Ended) {
					t.Errorf("receiver %d: outcome %q, ended %v", i, rr.Outcome, rr.Ended)
				}
			}
			if res.LostAfter <= 0 || res.PreRate <= 0 {
				t.Fatalf("no ReceiverLost event after the kill (lost after %v, %.0f rec/s before it)", res.LostAfter, res.PreRate)
			}
			// Rates of one run against each other: a loaded machine slows
			// them all alike, and no figure is an absolute time.
			held, resumed := res.HeldRate/res.PreRate, res.ResumeRate/res.PreRate
			switch pol {
			case protocol.FlowMin:
				// Held at the dead receiver's edge until the timeout dropped
				// it, then at full speed again, catching up on its schedule.
				if edge := int64(res.KilledDelivered) + int64(c.ReorderSlots); res.ProducedAtLost > edge {
					t.Errorf("min: %d records produced when the dead receiver was dropped, past its edge %d (delivered %d + window %d)",
						res.ProducedAtLost, edge, res.KilledDelivered, c.ReorderSlots)
				}
				// Held, the dead receiver's edge keeps the rate near a
				// quarter of it (5 004 of 19 985 rec/s in one run); resumed,
				// a run on the idle machine during make test reached 0.48×
				// while the survivors caught up: 0.35× tells the two apart.
				if resumed < 0.35 {
					t.Errorf("min: %.2f× the rate before the kill after the receiver was dropped, want resumed (≥ 0.35×; held is ≈ 0.25×)", resumed)
				}
			case protocol.FlowMax:
				if held < 0.5 {
					t.Errorf("max: %.2f× the rate before the kill while the dead receiver was counted, want not held (≥ 0.5×)", held)
				}
			}
		})
	}
}
