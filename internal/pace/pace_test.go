package pace

import (
	"testing"
	"time"
)

// TestBucket: a full bucket lets Burst's worth go at once, then one per
// 1/rate; after any pause it holds at most the burst, never the pause's
// worth.
func TestBucket(t *testing.T) {
	const rate = 10000.0 // 1 event per 100 µs; burst 2 ms = 20
	b := New(rate)
	now := int64(1)
	n := 0
	for b.Ready(now) {
		b.Spend()
		n++
	}
	if n != 20 {
		t.Fatalf("a full bucket let %d go at once, want 20 (2 ms at %v/s)", n, rate)
	}
	if d := b.Wait(now); d <= 0 || d > 100*time.Microsecond+1 {
		t.Fatalf("empty bucket: wait %v, want ≤ 100 µs", d)
	}
	now += int64(100 * time.Microsecond)
	if !b.Ready(now) {
		t.Fatal("no token 1/rate later")
	}
	b.Spend()
	if b.Ready(now) {
		t.Fatal("two tokens 1/rate later")
	}
	now += int64(10 * time.Second) // a long pause
	n = 0
	for b.Ready(now) {
		b.Spend()
		n++
	}
	if n != 20 {
		t.Fatalf("after a 10 s pause %d went at once, want the burst of 20", n)
	}
	// A clock that goes back (never, from a loop) adds nothing.
	if b.Ready(now - 1) {
		t.Fatal("a token from a clock going back")
	}
	if b := New(10); b.burst != 1 {
		t.Fatalf("burst at 10/s: %v, want 1 (never less than one event)", b.burst)
	}
}

// TestNilPacesNothing: New(0) is nil, and a nil Bucket lets every event
// go.
func TestNilPacesNothing(t *testing.T) {
	b := New(0)
	if b != nil || New(-1) != nil {
		t.Fatal("a rate ≤ 0 made a bucket")
	}
	for i := range 1000 {
		if !b.Ready(int64(i)) || b.Wait(int64(i)) != 0 {
			t.Fatal("a nil bucket held an event back")
		}
		b.Spend()
	}
}

// TestAvail: Avail counts what Ready would allow one by one, capped at
// the limit; SpendN spends like as many Spends; a nil bucket allows the
// limit.
func TestAvail(t *testing.T) {
	b, c := New(10000), New(10000) // burst 20, one per 100 µs
	now := int64(1)
	for _, step := range []time.Duration{0, 0, 350 * time.Microsecond, 40 * time.Microsecond, time.Second} {
		now += int64(step)
		n := 0
		for c.Ready(now) {
			c.Spend()
			n++
		}
		if got := b.Avail(now, 1000); got != n {
			t.Fatalf("after %v: Avail %d, Ready allowed %d", step, got, n)
		}
		if got := b.Avail(now, 3); got != min(3, n) {
			t.Fatalf("after %v: Avail with limit 3 is %d, want %d", step, got, min(3, n))
		}
		b.SpendN(n)
		if b.Ready(now) {
			t.Fatalf("after %v: a token left after SpendN(%d)", step, n)
		}
	}
	var nb *Bucket
	if nb.Avail(1, 7) != 7 || nb.Avail(1, 0) != 0 || nb.Avail(1, -1) != 0 {
		t.Fatal("a nil bucket does not allow exactly the limit")
	}
	nb.SpendN(3)
}

// TestResumesAtRate: a run that polls every 5 µs and is stopped for 2 s —
// not polled at all, or polled with every event refused (spending nothing)
// — resumes at its rate: the busiest 10 ms after the stop carries at most
// twice the rate's 10 ms worth, and over the second after it the rate is
// kept.
func TestResumesAtRate(t *testing.T) {
	const rate = 20000.0
	for _, refused := range []bool{false, true} {
		b := New(rate)
		var times []int64
		now := int64(1)
		run := func(d time.Duration, refuse bool) {
			for end := now + int64(d); now < end; now += int64(5 * time.Microsecond) {
				for b.Ready(now) && !refuse {
					b.Spend()
					times = append(times, now)
				}
			}
		}
		run(time.Second, false)
		if refused {
			run(2*time.Second, true)
		} else {
			now += int64(2 * time.Second)
		}
		before := len(times)
		run(time.Second, false)
		after := times[before:]
		if got := len(after); got < int(0.99*rate) || got > int(1.01*rate)+int(rate*Burst.Seconds()) {
			t.Fatalf("refused %v: %d events in the second after the stop, want the rate (%v/s) plus at most the burst", refused, got, rate)
		}
		best, j := 0, 0
		for i, at := range after {
			for j < len(after) && after[j] < at+int64(10*time.Millisecond) {
				j++
			}
			best = max(best, j-i)
		}
		if limit := int(2 * rate * 0.010); best > limit {
			t.Fatalf("refused %v: busiest 10 ms after the stop %d events, want ≤ %d (2× the rate)", refused, best, limit)
		}
	}
}

func TestBucketAllocs(t *testing.T) {
	b := New(1e6)
	now := int64(1)
	if a := testing.AllocsPerRun(1000, func() {
		now += 1000
		if b.Ready(now) {
			b.Spend()
		}
		b.SpendN(b.Avail(now, 4))
		_ = b.Wait(now)
	}); a != 0 {
		t.Fatalf("%v allocations per event", a)
	}
}
