package benchkit

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCountersForOtherThread opens the group from this goroutine on
// another locked thread's id: that thread's CPU time is counted, this
// one's is not.
func TestCountersForOtherThread(t *testing.T) {
	tidc, start, done := make(chan int), make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tidc <- unix.Gettid()
		<-start
		spinCPU(20 * time.Millisecond)
		close(done)
	}()
	tid := <-tidc
	c, err := OpenCountersFor(tid)
	defer func() { c.Close() }()
	if err != nil {
		t.Skipf("no perf event at all on this kernel: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	close(start)
	<-done
	got, err := c.Stop(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g.Name == "task-clock" && g.OK && g.Total < uint64(10*time.Millisecond) {
			t.Errorf("task-clock %d ns of the other thread after its 20 ms CPU-time spin", g.Total)
		}
	}
}

// spinCPU spins for d of the calling thread's CPU time (not wall time: on
// a loaded machine a wall-clock spin may get a fraction of a core).
func spinCPU(d time.Duration) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	until := ts.Nano() + int64(d)
	for ts.Nano() < until {
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	}
}
