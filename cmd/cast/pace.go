package main

import "time"

// bucket paces a run of events (records sent, records consumed) at rate
// per second as a token bucket: tokens accrue at rate, up to burst, and
// each event spends one. After any stall (a closed flow-control window,
// a WAL that refused records, SIGSTOP, a descheduled thread) the run
// resumes at its rate with at most burst events at once, instead of
// racing to catch up with a schedule it fell behind. The clock is the
// caller's (ns, monotonic): the loop's, or a test's.
type bucket struct {
	perNs  float64 // tokens per ns
	burst  float64
	tokens float64
	last   int64 // when tokens was last brought up to date; 0: never
}

// paceBurst is how much of a second's worth of events a bucket lets go
// at once: enough to ride over a parked loop's 1 ms wake-ups without
// losing rate, small enough that the busiest 10 ms after a stall stays
// well under twice the rate.
const paceBurst = 2 * time.Millisecond

// newBucket paces at rate events per second (> 0), bursting at most
// paceBurst's worth and never less than one event. It starts full.
func newBucket(rate float64) *bucket {
	burst := max(1, rate*paceBurst.Seconds())
	return &bucket{perNs: rate / 1e9, burst: burst, tokens: burst}
}

// ready reports whether an event may happen at now.
func (b *bucket) ready(now int64) bool {
	b.fill(now)
	return b.tokens >= 1
}

// spend takes the token of an event that happened (call it after ready
// said yes and the event went through: a refused send costs nothing).
func (b *bucket) spend() { b.tokens-- }

// wait is how long from now until the next event may happen (0: now).
func (b *bucket) wait(now int64) time.Duration {
	if b.ready(now) {
		return 0
	}
	return time.Duration((1-b.tokens)/b.perNs) + 1
}

func (b *bucket) fill(now int64) {
	if b.last != 0 && now > b.last {
		b.tokens = min(b.burst, b.tokens+float64(now-b.last)*b.perNs)
	}
	if now > b.last {
		b.last = now
	}
}
