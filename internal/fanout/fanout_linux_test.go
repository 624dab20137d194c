package fanout

import (
	"context"
	"testing"
	"time"

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
		t.Logf("  r%d outcome %q naks sent %d (core)", i, rr.Outcome, rr.Stats.NaksSent)
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

func TestFanoutKillRestart(t *testing.T) {
	netns.Require(t)
	c := DefaultConfig()
	c.Receivers, c.Records, c.Rate = 3, 30_000, 20_000
	c.WAL, c.Kill, c.KillAt, c.Down = true, 1, 10_000, 200*time.Millisecond
	c.Timeout = 60 * time.Second
	res, err := Run(context.Background(), c)
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
	if k := res.Receivers[1]; !k.Killed || k.TCP == 0 {
		t.Errorf("receiver 1: killed %v, %d records over TCP", k.Killed, k.TCP)
	}
}
