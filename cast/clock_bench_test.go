package cast

import (
	"testing"
	"time"
)

// BenchmarkClockRead is what a clock read costs on this machine: the
// loop's own (a monotonic read since its epoch, once an iteration), and
// time.Now, which reads the wall clock too. A per-record stamp in a
// delivery callback pays one of them a record (cmd/cast's consume and
// echo take the monotonic one).
func BenchmarkClockRead(b *testing.B) {
	var sink int64
	b.Run("loop", func(b *testing.B) {
		l := &Loop{epoch: time.Now()}
		for b.Loop() {
			sink += l.clock()
		}
	})
	b.Run("since", func(b *testing.B) {
		t := time.Now()
		for b.Loop() {
			sink += int64(time.Since(t))
		}
	})
	b.Run("now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
	_ = sink
}
