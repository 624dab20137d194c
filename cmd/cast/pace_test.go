package main

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLoop is the loop as a paced producer sees it: Send refuses while
// shut (a closed window, a WAL that holds records back) and records the
// clock of every record it takes.
type fakeLoop struct {
	now   *int64
	shut  bool
	times []int64
}

func (f *fakeLoop) Send(uint16, []byte) (uint64, error) {
	if f.shut {
		return 0, errors.New("window closed")
	}
	f.times = append(f.times, *f.now)
	return uint64(len(f.times)), nil
}

func (f *fakeLoop) SendBatch(typ uint16, payloads [][]byte) (int, error) {
	for i, p := range payloads {
		if _, err := f.Send(typ, p); err != nil {
			return i, err
		}
	}
	return len(payloads), nil
}

func (f *fakeLoop) End() error { return nil }

// TestPacedResumesAtRate: a paced sender stopped for 2 s — the loop not
// polling it (SIGSTOP, descheduled) or refusing its records (a window
// hold) — resumes at its rate: on the injected clock, the busiest 10 ms
// after the stop carries at most twice the rate's 10 ms worth (the old
// schedule sent the stop's 2 s worth at once).
func TestPacedResumesAtRate(t *testing.T) {
	const rate = 20000.0
	for _, how := range []string{"not polled", "refused"} {
		t.Run(how, func(t *testing.T) {
			var now int64 = 1
			f := &fakeLoop{now: &now}
			var sent atomic.Int64
			pr := newPaced(sendOpts{n: 1 << 30, payload: 64, rate: rate}, &sent, make(chan struct{}))
			step := int64(5 * time.Microsecond) // a spinning loop's poll
			run := func(d time.Duration) {
				for end := now + int64(d); now < end; now += step {
					pr.poll(f, now)
				}
			}
			run(time.Second)
			stopAt := now
			if how == "not polled" {
				now += int64(2 * time.Second)
			} else {
				f.shut = true
				run(2 * time.Second)
				f.shut = false
			}
			resume := now
			run(time.Second)
			if got := len(f.times); got < int(0.95*2*rate) || got > int(1.05*2*rate) {
				t.Fatalf("%d records in the 2 s it could send: the rate (%v/s) was not kept", got, rate)
			}
			// The busiest 10 ms window starting at or after the resume.
			win := int64(10 * time.Millisecond)
			best, j := 0, 0
			for i, at := range f.times {
				if at < resume {
					continue
				}
				if j < i {
					j = i
				}
				for j < len(f.times) && f.times[j] < at+win {
					j++
				}
				best = max(best, j-i)
			}
			limit := int(2 * rate * 0.010)
			t.Logf("stopped at %.3f s for 2 s (%s): busiest 10 ms after resuming %d records (rate's worth %d, limit %d)",
				float64(stopAt)/1e9, how, best, int(rate*0.010), limit)
			if best > limit {
				t.Fatalf("busiest 10 ms after the stop: %d records, want ≤ %d (2× the rate)", best, limit)
			}
		})
	}
}

// budgetLoop takes at most budget records per poll (a batch that fills),
// then refuses; it numbers the records it takes from 1.
type budgetLoop struct {
	budget, left int
	seq          uint64
	ended        bool
}

var errFakeFull = errors.New("batch full")

func (b *budgetLoop) Send(uint16, []byte) (uint64, error) {
	if b.left == 0 {
		return 0, errFakeFull
	}
	b.left--
	b.seq++
	return b.seq, nil
}

func (b *budgetLoop) SendBatch(typ uint16, payloads [][]byte) (int, error) {
	for i, p := range payloads {
		if _, err := b.Send(typ, p); err != nil {
			return i, err
		}
	}
	return len(payloads), nil
}

func (b *budgetLoop) End() error { b.ended = true; return nil }

// TestPacedCountsRefusals: an unpaced producer whose loop takes 0, 1 or a
// few of what it offers per poll sends exactly -n records, keeps lastSeq
// at the seq of the last one taken and ends the stream once, after the
// last.
func TestPacedCountsRefusals(t *testing.T) {
	for _, budget := range []int{1, 2, 7, 300} {
		var sent atomic.Int64
		var last atomic.Uint64
		done := make(chan struct{})
		const n = 1000
		pr := newPaced(sendOpts{n: n, payload: 32, lastSeq: &last}, &sent, done)
		l := &budgetLoop{budget: budget}
		for poll := 0; poll < 3*n && !l.ended; poll++ {
			l.left = budget
			if poll%3 == 1 {
				l.left = 0 // a poll where the loop refuses everything
			}
			pr.poll(l, int64(poll+1))
			if got := uint64(sent.Load()); got != l.seq || last.Load() != l.seq {
				t.Fatalf("budget %d, poll %d: sent %d, lastSeq %d, loop took %d", budget, poll, got, last.Load(), l.seq)
			}
		}
		select {
		case <-done:
		default:
			t.Fatalf("budget %d: not done after %d records", budget, l.seq)
		}
		if l.seq != n || !l.ended {
			t.Fatalf("budget %d: %d records taken (want %d), ended %v", budget, l.seq, n, l.ended)
		}
		pr.poll(l, 1<<40)
		if l.seq != n {
			t.Fatalf("budget %d: a poll after the end sent more", budget)
		}
	}
}

// TestPacedPollAllocs: a producer's poll, run in the loop's iteration,
// allocates nothing.
func TestPacedPollAllocs(t *testing.T) {
	var sent atomic.Int64
	pr := newPaced(sendOpts{n: 1 << 40, payload: 128, rate: 1e9}, &sent, make(chan struct{}))
	l := &budgetLoop{}
	now := int64(1)
	if a := testing.AllocsPerRun(1000, func() {
		l.left = 64
		now += 1000
		pr.poll(l, now)
	}); a != 0 {
		t.Fatalf("%v allocations per poll", a)
	}
	if sent.Load() == 0 {
		t.Fatal("nothing sent")
	}
}
