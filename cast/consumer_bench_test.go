package cast

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/internal/latency"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// BenchmarkOutageRecovery measures the consumer's recovery from a dark
// link that hid a 52 501-record gap: from the escalation (Reconnect on
// the records sent after the gap, the link's first datagrams) to caught
// up over TLS from the WAL, at several WAL sizes (records already on disk
// before the stream under test starts), to show the recovery does not
// grow with the WAL.
// Each b.N iteration is one outage cycle; the floor is a wal.Reader
// reading the same 52 501 records from the same WAL in the same run.
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench OutageRecovery -benchtime 8x ./cast/
func BenchmarkOutageRecovery(b *testing.B) {
	const gap = 52501
	for _, prefill := range []int{0, 1_000_000, 4_000_000} {
		b.Run(fmt.Sprintf("wal=%d", prefill), func(b *testing.B) {
			r := newConsRigPrefill(b, prefill)
			escalated := make(chan time.Time, 64)
			catchUps := make(chan struct{}, 64)
			cfg := r.consumerConfig(filepath.Join(b.TempDir(), "c.tip"))
			if err := replay.WriteTip(cfg.TipPath, uint64(prefill)); err != nil {
				b.Fatal(err)
			}
			var evlog []string
			var evMu sync.Mutex
			cfg.OnEvent = func(e Event) {
				evMu.Lock()
				evlog = append(evlog, fmt.Sprintf("%s %v %v tip=%d rec=%d d=%v", time.Now().Format("05.000"), e.Kind, e.Outcome.Err(), e.Tip, e.Records, e.Duration.Round(time.Millisecond)))
				evMu.Unlock()
				switch e.Kind {
				case EventFaulted, EventReconnect, EventSenderRestarted:
					escalated <- time.Now()
				case EventCaughtUp:
					catchUps <- struct{}{}
				}
			}
			app := &orderCheck{t: b, first: uint64(prefill) + 1}
			_, stop := startConsumer(b, r, cfg, app)
			app.waitFor(b, r.send(1000), 30*time.Second)
			rec := latency.NewSamples(b.N)
			floor := latency.NewSamples(b.N)
			var nCatch, nEsc int
			b.ResetTimer()
			for range b.N {
				for len(escalated) > 0 {
					<-escalated
				}
				for len(catchUps) > 0 {
					<-catchUps
				}
				r.dark()
				from := r.sent.Load() + 1
				gapEnd := r.send(gap)
				app.markAt(gapEnd)
				r.holdInput(true) // Reconnect on the records after the gap, as in TestConsumerOutage
				r.lightAfter(gapEnd)
				last := r.send(100)
				r.holdInput(false)
				var t0 time.Time
				select {
				case t0 = <-escalated:
				case <-time.After(60 * time.Second):
					b.Fatal("no escalation")
				}
				app.waitFor(b, last, 30*time.Second)
				// Recovery: escalation → the last record of the gap delivered.
				rec.Record(int64(app.marked().Sub(t0)))
				evMu.Lock()
				if os.Getenv("OUTAGE_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "cycle gapEnd=%d escalated %s marked %s (%v): %v\n", gapEnd, t0.Format("05.000"), app.marked().Format("05.000"), app.marked().Sub(t0).Round(time.Millisecond), evlog)
				}
				evlog = nil
				evMu.Unlock()
				nEsc += 1 + len(escalated)
				nCatch += len(catchUps)
				// Floor: read the same gap straight from the WAL.
				f0 := time.Now()
				rd, err := wal.OpenReader(r.dir, 1, from)
				if err != nil {
					b.Fatal(err)
				}
				for range gap {
					if _, err := rd.Next(); err != nil {
						b.Fatal(err)
					}
				}
				rd.Close()
				floor.Record(int64(time.Since(f0)))
			}
			b.StopTimer()
			stop()
			if app.err != nil {
				b.Fatal(app.err)
			}
			s, f := rec.Summarize(), floor.Summarize()
			b.ReportMetric(float64(s.P50)/1e6, "p50-ms")
			b.ReportMetric(float64(s.P99)/1e6, "p99-ms")
			b.ReportMetric(float64(s.Max)/1e6, "max-ms")
			b.ReportMetric(float64(f.P50)/1e6, "floor-p50-ms")
			b.ReportMetric(float64(s.P50)/float64(f.P50), "x-floor")
			fmt.Fprintf(os.Stderr, "outage wal=%d: %d escalations, %d catch-ups in %d cycles\n", prefill, nEsc, nCatch, b.N)
			fmt.Fprintf(os.Stderr, "outage wal=%d gap=%d n=%d recovery p50 %.1f ms p99 %.1f ms min %.1f max %.1f sd %.1f | floor (wal.Reader) p50 %.1f ms | ratio %.1fx\n",
				prefill, gap, s.N, float64(s.P50)/1e6, float64(s.P99)/1e6, float64(s.Min)/1e6, float64(s.Max)/1e6, s.StdDev/1e6, float64(f.P50)/1e6, float64(s.P50)/float64(f.P50))
		})
	}
}
