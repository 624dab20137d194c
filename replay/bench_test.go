package replay

import (
	"github.com/walcast/walcast/internal/latency"
	"github.com/walcast/walcast/wire"

	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"
)

// BenchmarkCatchUp measures a full catch-up (from seq 1 to CaughtUp) of
// a WAL over loopback TCP: TLS 1.3 and plaintext, next to the floor — a
// wal.Reader reading the same records in the same process, no network.
// Each b.N iteration is one complete catch-up by a fresh client.
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench CatchUp -benchtime 5x ./replay/
func BenchmarkCatchUp(b *testing.B) {
	for _, sz := range []struct{ n, payload int }{{1_000_000, 64}, {200_000, 1000}} {
		dir := b.TempDir()
		cfg := wal.DefaultConfig(dir)
		cfg.Stream = 1
		w, err := wal.Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		p := make([]byte, sz.payload)
		for range sz.n {
			appendRetry(b, w, 100, p)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		frameBytes := float64(sz.n * (wire.HeaderSize + sz.payload))
		src := NewWriterSource(w, dir, 1)
		_, tlsAddr := startServer(b, nil, src)
		_, plainAddr := startServer(b, func(c *ServerConfig) { c.TLS = nil; c.Plaintext = true }, src)
		for _, mode := range []string{"floor", "plaintext", "tls"} {
			b.Run(fmt.Sprintf("%s/records=%d/payload=%d", mode, sz.n, sz.payload), func(b *testing.B) {
				samples := latency.NewSamples(b.N)
				for range b.N {
					t0 := time.Now()
					var got int
					switch mode {
					case "floor":
						rd, err := wal.OpenReader(dir, 1, 1)
						if err != nil {
							b.Fatal(err)
						}
						for range sz.n {
							if _, err := rd.Next(); err != nil {
								b.Fatal(err)
							}
							got++
						}
						rd.Close()
					default:
						ccfg := testClientConfig(b, tlsAddr)
						if mode == "plaintext" {
							ccfg = testClientConfig(b, plainAddr)
							ccfg.TLS, ccfg.Plaintext = nil, true
						}
						cl, err := NewClient(ccfg)
						if err != nil {
							b.Fatal(err)
						}
						if _, err := cl.CatchUp(context.Background(), func(wire.Header, []byte) error { got++; return nil }); err != nil {
							b.Fatal(err)
						}
					}
					if got != sz.n {
						b.Fatalf("%d records, want %d", got, sz.n)
					}
					samples.Record(int64(time.Since(t0)))
				}
				s := samples.Summarize()
				sec := float64(s.P50) / 1e9
				b.ReportMetric(float64(sz.n)/sec, "rec/s")
				b.ReportMetric(frameBytes/sec/1e6, "MB/s")
				fmt.Fprintf(os.Stderr, "catch-up %-9s records=%d payload=%d n=%d: p50 %.1f ms (min %.1f max %.1f) = %.2f M rec/s, %.0f MB/s\n",
					mode, sz.n, sz.payload, s.N, float64(s.P50)/1e6, float64(s.Min)/1e6, float64(s.Max)/1e6, float64(sz.n)/sec/1e6, frameBytes/sec/1e6)
			})
		}
		w.Close()
	}
}
