package benchkit

import (
	"testing"
	"time"
)

// Every cost row moves records and accounts for both threads: CPU time
// at least the idle part, every record sent delivered on the lossless
// rows (no timing is asserted).
func TestCostRows(t *testing.T) {
	c := DefaultThroughputConfig()
	c.Duration, c.CPUs, c.Dir = 30*time.Millisecond, [2]int{-1, -1}, t.TempDir()
	for _, size := range []int{144, 1443} {
		c.Size = size
		for _, name := range CostRows {
			r, err := Cost(name, c)
			if err != nil {
				t.Fatalf("%s %d B: %v", name, size, err)
			}
			if r.Sent == 0 || r.Delivered == 0 || r.Seconds <= 0 {
				t.Fatalf("%s %d B moved nothing: %+v", name, size, r)
			}
			if r.Send.CPU <= 0 || r.Send.IdleCPU > r.Send.CPU || r.Send.Idle > r.Send.Iters {
				t.Fatalf("%s %d B: sender account %+v", name, size, r.Send)
			}
			if name != "wal-alone" && (r.Recv.CPU <= 0 || r.Recv.IdleCPU > r.Recv.CPU) {
				t.Fatalf("%s %d B: receiver account %+v", name, size, r.Recv)
			}
			if name != "floor-gso-gro" && name != "datapath" && name != "+framing/crc" && r.Delivered != r.Sent {
				t.Fatalf("%s %d B: %d sent, %d delivered", name, size, r.Sent, r.Delivered)
			}
			if r.Note != "" && name == "+framing/crc" {
				t.Fatalf("%s %d B: %s", name, size, r.Note)
			}
		}
	}
	if _, err := Cost("nope", c); err == nil {
		t.Fatal("an unknown row ran")
	}
}
