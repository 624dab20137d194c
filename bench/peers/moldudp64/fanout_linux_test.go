package moldudp64

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/internal/fanout"
	"github.com/walcast/walcast/internal/netns"
)

func TestFanout(t *testing.T) {
	netns.Require(t)
	for _, group := range []bool{false, true} {
		c := fanout.DefaultConfig()
		c.Receivers, c.Records, c.Rate, c.Loss = 3, 10_000, 5_000, 0.01
		c.Group = netip.MustParseAddrPort("239.199.2.1:0")
		c.Timeout = 60 * time.Second
		res, err := RunFanout(context.Background(), c, FanoutOptions{RepairsToGroup: group})
		t.Logf("repairs to group %v: %.3f datagrams/record, lost events %d, requests %d (%.2f/event), repairs %d (%.2f/lost seq), load %v",
			group, res.DatagramsPerRecord(), res.LostEvents, res.NakFrames, res.NaksPerEvent(), res.Repairs, res.RepairsPerLost(), res.Load)
		if err != nil {
			t.Fatal(err)
		}
		for i, rr := range res.Receivers {
			t.Logf("  r%d delivered %d lost %d dropped %d requests %d p50 %.0f µs p99 %.0f µs", i, rr.Delivered, rr.Lost, rr.Dropped, rr.NakFrames,
				float64(rr.Latency.P50)/1e3, float64(rr.Latency.P99)/1e3)
			if rr.Delivered != uint64(c.Records) {
				t.Errorf("subscriber %d delivered %d of %d", i, rr.Delivered, c.Records)
			}
		}
		if res.LostEvents == 0 || res.Repairs == 0 {
			t.Errorf("no loss repaired (lost events %d, repairs %d)", res.LostEvents, res.Repairs)
		}
	}
}
