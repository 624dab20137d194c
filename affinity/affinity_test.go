package affinity

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		bad  bool
	}{
		{"", nil, false},
		{"\n", nil, false},
		{"0", []int{0}, false},
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}, false},
		{"domain,managed_irq,2-3", []int{2, 3}, false},
		{"3-1", nil, true},
		{"1-x", nil, true},
	}
	for _, c := range cases {
		got, err := ParseCPUList(c.in)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v %v", c.in, got, err)
		}
	}
}

func TestStrategy(t *testing.T) {
	for _, s := range []Strategy{Spin, SpinYield, Backoff, Park} {
		got, err := ParseStrategy(s.String())
		if err != nil || got != s {
			t.Fatalf("%v: %v %v", s, got, err)
		}
	}
	if s, _ := ParseStrategy("netpoll"); s != Park {
		t.Fatal("netpoll alias")
	}
	if _, err := ParseStrategy("nap"); err == nil {
		t.Fatal("unknown accepted")
	}
}

func TestIdlerBackoffSleeps(t *testing.T) {
	d := Idler{Strategy: Backoff, Spins: 2, Yields: 2, MinSleep: time.Millisecond, MaxSleep: 4 * time.Millisecond}
	start := time.Now()
	for i := 0; i < 4; i++ { // spins and yields: no sleep
		d.Idle()
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("spin phase slept %v", el)
	}
	start = time.Now()
	d.Idle() // 1 ms
	d.Idle() // 2 ms
	d.Idle() // 4 ms
	d.Idle() // 4 ms (capped)
	if el := time.Since(start); el < 11*time.Millisecond {
		t.Fatalf("backoff slept only %v", el)
	}
	d.Reset()
	start = time.Now()
	d.Idle()
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("reset did not restart the spin phase: %v", el)
	}
}

func TestIdlerAllocs(t *testing.T) {
	for _, s := range []Strategy{Spin, SpinYield, Park} {
		d := Idler{Strategy: s, Spins: 1}
		if n := testing.AllocsPerRun(100, d.Idle); n != 0 {
			t.Fatalf("%v: %v allocs", s, n)
		}
	}
}

func TestGOMAXPROCS(t *testing.T) {
	old := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	if err := CheckGOMAXPROCS(1); !errors.Is(err, ErrTooFewProcs) {
		t.Fatalf("2 procs, 1 spinner: %v", err)
	}
	if prev := EnsureGOMAXPROCS(1); prev != 2 || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("prev %d now %d", prev, runtime.GOMAXPROCS(0))
	}
	if err := CheckGOMAXPROCS(1); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{Pin: true, CPU: -2}, {CPU: 3}, {FIFO: 100}, {FIFO: -1}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if DefaultConfig().Validate() != nil {
		t.Fatal("default rejected")
	}
}
