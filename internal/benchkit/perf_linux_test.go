package benchkit

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCountersOnThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenCounters() // usable even on error: every event n/a
	defer func() { c.Close() }()
	if err != nil {
		t.Skipf("no perf event at all on this kernel: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Spin for 5 ms of this thread's CPU time, not of wall time: on a
	// loaded machine a wall-clock spin may get a fraction of a core.
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	until := ts.Nano() + int64(5*time.Millisecond)
	for ts.Nano() < until {
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	}
	got, err := c.Stop(1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(PerfEvents) {
		t.Fatalf("%d counts", len(got))
	}
	for _, g := range got {
		t.Log(g.String(), g.Why)
		if !g.OK && g.Why == "" {
			t.Errorf("%s n/a without a reason", g.Name)
		}
		if g.Name == "task-clock" && g.OK && g.Total < uint64(time.Millisecond) {
			t.Errorf("task-clock %d ns after a 5 ms CPU-time spin", g.Total)
		}
	}
}

// Every hardware event refused (as in a VM without a PMU): the software
// ones still count, and the hardware ones say why.
func TestCountersFallback(t *testing.T) {
	orig := perfEventOpen
	t.Cleanup(func() { perfEventOpen = orig })
	perfEventOpen = func(attr *unix.PerfEventAttr, pid, cpu, group, flags int) (int, error) {
		if attr.Type == unix.PERF_TYPE_HARDWARE {
			return -1, unix.ENOENT
		}
		return orig(attr, pid, cpu, group, flags)
	}
	c, err := OpenCounters() // usable even on error: every event n/a
	defer func() { c.Close() }()
	if err != nil {
		t.Skipf("software events unavailable too: %v", err)
	}
	if av := c.Available(); len(av) != 4 || av[0] != "task-clock" {
		t.Fatalf("available %v", av)
	}
	got, err := c.Stop(1)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].OK || got[0].Why == "" || !got[4].OK {
		t.Fatalf("%+v", got)
	}
	// Nothing at all: an error, and every reading n/a.
	perfEventOpen = func(*unix.PerfEventAttr, int, int, int, int) (int, error) { return -1, unix.EACCES }
	c2, err := OpenCounters()
	if err == nil {
		t.Fatal("no error with every event refused")
	}
	got, _ = c2.Stop(1)
	for _, g := range got {
		if g.OK {
			t.Fatalf("%+v", g)
		}
	}
}

func TestParseGroupRead(t *testing.T) {
	b := make([]byte, 40)
	le := binary.NativeEndian
	le.PutUint64(b, 2)
	le.PutUint64(b[8:], 200)  // enabled
	le.PutUint64(b[16:], 100) // running: multiplexed half the time
	le.PutUint64(b[24:], 10)
	le.PutUint64(b[32:], 7)
	v, err := parseGroupRead(b, 2)
	if err != nil || v[0] != 20 || v[1] != 14 {
		t.Fatalf("%v %v", v, err)
	}
	for _, bad := range [][]byte{nil, b[:20], b[:32]} {
		if _, err := parseGroupRead(bad, 2); err == nil {
			t.Fatalf("accepted %d bytes", len(bad))
		}
	}
	if _, err := parseGroupRead(b, 3); err == nil {
		t.Fatal("accepted wrong count")
	}
}
