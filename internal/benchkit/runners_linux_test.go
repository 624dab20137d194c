package benchkit

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/walcast/walcast/affinity"
)

// The runners are exercised at a tiny scale: they must complete, measure
// every ping and deliver frames. No timing is asserted.
func TestRTTRunners(t *testing.T) {
	for _, mode := range []affinity.Strategy{affinity.Spin, affinity.Park} {
		c := DefaultRTTConfig()
		c.N, c.Warmup, c.Mode, c.CPUs = 300, 20, mode, [2]int{-1, -1}
		r, err := RTTRawUDP(c)
		if err != nil {
			t.Fatal(mode, err)
		}
		if r.Latency.N != 300 || r.Latency.P50 <= 0 || r.Name != "raw-udp" || r.Mode != mode.String() {
			t.Fatalf("%v: %+v", mode, r)
		}
	}
	c := DefaultRTTConfig()
	c.N, c.Warmup = 200, 10
	r, err := RTTGoNet(c)
	if err != nil || r.Latency.N != 200 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestThroughputRaw(t *testing.T) {
	for _, gso := range []bool{false, true} {
		c := DefaultThroughputConfig()
		c.Duration, c.GSO, c.GRO, c.CPUs = 100*time.Millisecond, gso, gso, [2]int{-1, -1}
		r, err := ThroughputRaw(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Records == 0 || r.Gbps <= 0 {
			t.Fatalf("%+v", r)
		}
		t.Logf("%s: %.0f rec/s %s", r.Name, r.RecPerS, r.Note)
	}
}

// TestThroughputFloorFrame: the bound row moves records at both sizes
// and every frame it received checked.
func TestThroughputFloorFrame(t *testing.T) {
	for _, size := range []int{144, 1443} {
		c := DefaultThroughputConfig()
		c.Size, c.Duration, c.CPUs = size, 100*time.Millisecond, [2]int{-1, -1}
		r, err := ThroughputFloorFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Records == 0 || r.Name != "floor+frame" || strings.Contains(r.Note, "bad") {
			t.Fatalf("%+v", r)
		}
		t.Logf("%d B: %.0f rec/s %s", size, r.RecPerS, r.Note)
	}
}

func TestCastingRunners(t *testing.T) {
	for _, mode := range []affinity.Strategy{affinity.Spin, affinity.Park} {
		c := DefaultRTTConfig()
		c.N, c.Warmup, c.Mode, c.CPUs = 300, 20, mode, [2]int{-1, -1}
		r, err := RTTCasting(c)
		if err != nil {
			t.Fatal(mode, err)
		}
		if r.Latency.N != 300 || r.Name != "casting-udp" {
			t.Fatalf("%+v", r)
		}
		c.Batch = 1
		r, err = RTTCastingMmsg(c)
		if err != nil {
			t.Fatal(mode, err)
		}
		if r.Latency.N != 300 || r.Name != "casting-mmsg" {
			t.Fatalf("%+v", r)
		}
	}
	for _, walOn := range []bool{false, true} {
		c := DefaultThroughputConfig()
		c.Duration, c.CPUs = 100*time.Millisecond, [2]int{-1, -1}
		r, err := ThroughputCasting(c, walOn, walOn)
		if err != nil {
			t.Fatal(err)
		}
		if r.Records == 0 {
			t.Fatalf("%+v", r)
		}
		t.Logf("%s: %.0f rec/s %s", r.Name, r.RecPerS, r.Note)
	}
}

// The floors run at a tiny scale: they must complete and measure; no
// timing is asserted.
func TestFloors(t *testing.T) {
	for _, mode := range []affinity.Strategy{affinity.Spin, affinity.Park} {
		c := DefaultRTTConfig()
		c.N, c.Warmup, c.Mode, c.CPUs = 300, 20, mode, [2]int{-1, -1}
		r, err := RTTFloor(c)
		if err != nil {
			t.Fatal(mode, err)
		}
		if r.Latency.N != 300 || r.Latency.P50 <= 0 || r.Name != "floor-loop" || r.Mode != mode.String() {
			t.Fatalf("%v: %+v", mode, r)
		}
	}
	tc := DefaultThroughputConfig()
	tc.Duration, tc.CPUs, tc.Dir = 100*time.Millisecond, [2]int{-1, -1}, t.TempDir()
	for _, size := range []int{144, 1443} {
		tc.Size = size
		r, err := ThroughputFloor(tc)
		if err != nil {
			t.Fatal(err)
		}
		if r.Records == 0 || r.Bytes != size || r.Name != "floor-gso-gro" {
			t.Fatalf("%+v", r)
		}
		w, err := WALAlone(tc)
		if err != nil {
			t.Fatal(err)
		}
		if w.Records == 0 || w.Name != "wal-alone" {
			t.Fatalf("%+v", w)
		}
	}
	d, err := DiskFloor(tc.Dir, 144, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d.Records == 0 || d.Name != "floor-odirect" {
		t.Fatalf("%+v", d)
	}
}

// TestSendViews: the datapath rows' send batch is one send's worth of
// views into one buffer, back to back, so Tx hands the kernel one iovec
// (as the casting rows' runs from the hot ring), not one per frame.
func TestSendViews(t *testing.T) {
	for _, size := range []int{144, 1443} {
		c := DefaultThroughputConfig()
		c.Size = size
		v, frames := sendViews(c)
		if v.Len() != c.PerSend() || len(frames) != c.PerSend() {
			t.Fatalf("%d B: %d messages, %d frames, want %d", size, v.Len(), len(frames), c.PerSend())
		}
		for i, f := range frames {
			m, _ := v.Msg(i)
			if v.Owned(i) || len(m) != size || &m[0] != &f[0] || cap(f) != size {
				t.Fatalf("%d B: message %d is not a %d-byte view of its frame", size, i, size)
			}
			if i > 0 && uintptr(unsafe.Pointer(&f[0]))-uintptr(unsafe.Pointer(&frames[i-1][0])) != uintptr(size) {
				t.Fatalf("%d B: frame %d does not follow frame %d", size, i, i-1)
			}
		}
	}
}
