package protocol

import (
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// BenchmarkReceiverLoss is the loss detector's path: a stream losing one
// record in eight, first NAKs as the gaps open, a re-NAK pass on Tick,
// then the repairs drain the ring. One op is one record.
func BenchmarkReceiverLoss(b *testing.B) {
	fs := frames(1 << 16)
	var sink int
	deliver := func(_ wire.Header, p []byte) { sink += len(p) }
	cfg := DefaultReceiverConfig()
	r, _ := NewReceiver(cfg)
	out := batch.New(256, 2048)
	now, next := int64(0), 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 64 {
		if next+64 > len(fs) {
			r.Resync()
			next = 0
		}
		out.Reset()
		now = lossyBlock(r, fs[next:next+64], now, cfg.NakDebounce, out, deliver)
		next += 64
	}
}

// lossyBlock hands r 64 frames of a stream losing one record in eight:
// the seven of each eight that arrive, a Tick past the NAK debounce (a
// re-NAK pass), then the repairs. It returns the clock after the Tick.
func lossyBlock(r *Receiver, fs [][]byte, now int64, debounce time.Duration, out *batch.Vec, deliver func(wire.Header, []byte)) int64 {
	for k := 0; k < 64; k++ {
		if k%8 != 3 {
			r.Handle(fs[k], now, out, deliver)
		}
	}
	now += int64(debounce) + 1
	r.Tick(now, out)
	for k := 3; k < 64; k += 8 {
		r.Handle(fs[k], now, out, deliver)
	}
	return now
}
