package benchkit

import (
	"sync/atomic"
	"testing"
	"time"
)

// drainRaw waits for a receiver that has not run yet, and gives up on
// one that runs and finds nothing.
func TestDrainRaw(t *testing.T) {
	var got atomic.Int64
	var polls atomic.Uint64
	const sent = 100
	done := func() bool { return got.Load() >= sent }

	// Descheduled: no polls for a while, then it runs and gets everything.
	go func() {
		time.Sleep(50 * time.Millisecond)
		polls.Add(1)
		got.Store(sent)
	}()
	drainRaw(done, got.Load, polls.Load, time.Minute)
	if !done() {
		t.Fatal("returned before the late receiver delivered")
	}

	// Runs and receives nothing more: lost, well before the limit.
	got.Store(10)
	stopPolling := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopPolling:
				return
			default:
				polls.Add(100)
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	start := time.Now()
	drainRaw(done, got.Load, polls.Load, time.Minute)
	close(stopPolling)
	if el := time.Since(start); el > 30*time.Second || done() {
		t.Fatalf("stalled receiver: waited %v, done %v", el, done())
	}

	// Never runs: the limit ends the wait.
	start = time.Now()
	drainRaw(done, got.Load, func() uint64 { return 0 }, 20*time.Millisecond)
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("returned before the limit with nothing polled")
	}
}
