// Package pace paces a run of events (records sent, records consumed) at
// a rate with a token bucket: tokens accrue at the rate up to a small
// burst, and each event that happens spends one. After any stall (a
// closed flow-control window, a WAL that refused records, SIGSTOP, a
// descheduled thread) a paced run resumes at its rate with at most the
// burst at once, instead of racing to catch up with a schedule it fell
// behind. The clock is the caller's (ns, monotonic): a loop's, or a
// test's. A Bucket is not safe for concurrent use; it allocates nothing
// after New.
package pace

import "time"

// Burst is how much of a second's worth of events a Bucket lets go at
// once: enough to ride over a parked loop's 1 ms wake-ups without losing
// rate, small enough that the busiest 10 ms after a stall stays well
// under twice the rate.
const Burst = 2 * time.Millisecond

// Bucket is a token bucket. A nil *Bucket paces nothing: Ready is always
// true and Spend does nothing, so a caller keeps one code path for paced
// and unpaced runs.
type Bucket struct {
	perNs  float64 // tokens per ns
	burst  float64 // tokens
	tokens float64
	last   int64 // when tokens was last brought up to date (ns); 0: never
}

// New paces at rate events per second, bursting at most Burst's worth and
// never less than one event. It starts full. rate ≤ 0 returns nil (no
// pacing).
func New(rate float64) *Bucket {
	if rate <= 0 {
		return nil
	}
	burst := max(1, rate*Burst.Seconds())
	return &Bucket{perNs: rate / 1e9, burst: burst, tokens: burst}
}

// Ready reports whether an event may happen at now (ns).
func (b *Bucket) Ready(now int64) bool {
	if b == nil {
		return true
	}
	b.fill(now)
	return b.tokens >= 1
}

// Spend takes the token of an event that happened: call it after Ready
// said yes and the event went through, so that a refused send costs
// nothing.
func (b *Bucket) Spend() { b.SpendN(1) }

// Avail is how many events, at most limit, may happen at now (ns) in one
// go: what Ready would allow one after another with a Spend each.
func (b *Bucket) Avail(now int64, limit int) int {
	if b == nil || limit <= 0 {
		return max(limit, 0)
	}
	b.fill(now)
	return int(min(float64(limit), max(b.tokens, 0)))
}

// SpendN takes the tokens of n events that happened (see Spend).
func (b *Bucket) SpendN(n int) {
	if b != nil {
		b.tokens -= float64(n)
	}
}

// Wait is how long from now (ns) until the next event may happen (0:
// now).
func (b *Bucket) Wait(now int64) time.Duration {
	if b.Ready(now) {
		return 0
	}
	return time.Duration((1-b.tokens)/b.perNs) + 1
}

// fill brings tokens up to date at now; a clock that goes back adds
// nothing.
func (b *Bucket) fill(now int64) {
	if b.last != 0 && now > b.last {
		b.tokens = min(b.burst, b.tokens+float64(now-b.last)*b.perNs)
	}
	if now > b.last {
		b.last = now
	}
}
