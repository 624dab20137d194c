package protocol

import (
	"math"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// ColdRequest asks the loop to read Count consecutive records starting at
// From from the WAL (off the hot thread) and hand the frames back through
// [Sender.ColdDone] (or [Sender.ColdFailed]).
type ColdRequest struct {
	From  uint64
	Count int
}

// coldQueue holds the NAKed seqs that missed the hot ring until the loop
// has read them from the WAL, and keeps a flood of NAKs for old seqs from
// amplifying from the disk.
//
// Invariants: no two used slots overlap, and a seq is queued again only
// once it is neither queued, running nor served within the dedup window
// (recent); at most maxInFlight slots are taken (running counts them);
// every queued record was paid for from budget; waiting counts the used
// slots not taken. A used slot is freed only by ColdDone or ColdFailed.
type coldQueue struct {
	slots       []coldSlot
	running     int // slots taken and not finished
	waiting     int // slots queued and not yet taken
	maxInFlight int
	maxRecords  uint64
	hasLog      bool // without a log every cold seq is rejected
	budget      coldBudget
	recent      [coldRecentSlots]coldServed
	recentNext  int
	stats       *SenderStats
}

type coldSlot struct {
	req    ColdRequest
	served int  // frames retransmitted so far
	taken  bool // handed to the loop by ColdRequests
	used   bool
}

// coldRecentSlots is how many recently served cold ranges the Sender
// remembers for de-duplication across NAKs.
const coldRecentSlots = 32

// coldServed is a cold range [from, end) served at time at.
type coldServed struct {
	from, end uint64
	at        int64
}

// coldBudget is the token bucket of cold reads: tokens in record·ns (one
// record costs 1e9), refilled at rate records per second up to full.
// Invariant: 0 ≤ tokens ≤ full; at is the time of the last refill (never:
// none yet, the bucket starts full).
type coldBudget struct {
	tokens, full int64
	rate         int64 // records/s
	at           int64
}

func newColdQueue(cfg SenderConfig, hasLog bool, stats *SenderStats) coldQueue {
	full := cfg.ColdBurst * 1e9
	return coldQueue{
		slots:       make([]coldSlot, cfg.MaxColdInFlight+cfg.MaxColdQueued),
		maxInFlight: cfg.MaxColdInFlight,
		maxRecords:  uint64(cfg.MaxColdRecords),
		hasLog:      hasLog,
		budget:      coldBudget{tokens: full, full: full, rate: cfg.ColdRate, at: never},
		stats:       stats,
	}
}

// refill adds the budget earned since the last refill.
func (b *coldBudget) refill(now int64) {
	if b.at == never {
		b.at = now
		return
	}
	el := now - b.at
	if el <= 0 {
		return
	}
	b.at = now
	if room := b.full - b.tokens; el >= room/b.rate+1 {
		b.tokens = b.full
	} else {
		b.tokens += el * b.rate
	}
}

// records is how many whole records the budget allows now.
func (b *coldBudget) records() uint64 { return uint64(b.tokens / 1e9) }

// queue queues [from, from+n) for a cold read, skipping seqs already
// covered by a queued or running request or served within dedup ns,
// splitting by MaxColdRecords and spending the budget.
func (q *coldQueue) queue(from, n uint64, now, dedup int64) {
	if !q.hasLog {
		q.stats.ColdRejected += n
		return
	}
	q.budget.refill(now)
	end := from + n
	for from < end {
		if q.budget.records() < 1 {
			q.stats.ColdOverBudget += end - from
			return
		}
		// Skip the prefix covered by an existing request or a recent serve.
		if c := q.coveredUntil(from, now, dedup); c > from {
			if c > end {
				c = end
			}
			q.stats.ColdDedup += c - from
			from = c
			continue
		}
		k := min(end-from, q.maxRecords)
		// Stop before the next covered seq so requests never overlap.
		if c := q.nextCovered(from, now, dedup); c < from+k {
			k = c - from
		}
		k = min(k, q.budget.records())
		slot := -1
		for j := range q.slots {
			if !q.slots[j].used {
				slot = j
				break
			}
		}
		if slot < 0 {
			q.stats.ColdRejected += end - from
			return
		}
		q.slots[slot] = coldSlot{req: ColdRequest{From: from, Count: int(k)}, used: true}
		q.waiting++
		q.budget.tokens -= int64(k) * 1e9
		q.stats.ColdQueued++
		from += k
	}
}

// coveredUntil returns the end (exclusive) of the queued or running
// request, or of the range served within dedup, that covers seq; 0 if
// none does.
func (q *coldQueue) coveredUntil(seq uint64, now, dedup int64) uint64 {
	for j := range q.slots {
		c := &q.slots[j]
		if c.used && seq >= c.req.From && seq < c.req.From+uint64(c.req.Count) {
			return c.req.From + uint64(c.req.Count)
		}
	}
	for j := range q.recent {
		r := &q.recent[j]
		if seq >= r.from && seq < r.end && now-r.at < dedup {
			return r.end
		}
	}
	return 0
}

// nextCovered returns the lowest seq above from at which a queued or
// running request, or a range served within dedup, begins (MaxUint64 if
// none).
func (q *coldQueue) nextCovered(from uint64, now, dedup int64) uint64 {
	next := uint64(math.MaxUint64)
	for j := range q.slots {
		if c := &q.slots[j]; c.used && c.req.From > from && c.req.From < next {
			next = c.req.From
		}
	}
	for j := range q.recent {
		if r := &q.recent[j]; r.from > from && r.from < next && now-r.at < dedup {
			next = r.from
		}
	}
	return next
}

// take copies queued requests into dst, lowest seqs first, and marks them
// running (see Sender.ColdRequests).
func (q *coldQueue) take(dst []ColdRequest) int {
	n := 0
	for n < len(dst) && q.running < q.maxInFlight {
		best := -1
		for j := range q.slots {
			c := &q.slots[j]
			if c.used && !c.taken && (best < 0 || c.req.From < q.slots[best].req.From) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		q.slots[best].taken = true
		q.running++
		q.waiting--
		dst[n] = q.slots[best].req
		n++
	}
	return n
}

// pending reports whether a queued request waits and may be taken now.
// The loop asks on every iteration: it is two compares.
func (q *coldQueue) pending() bool { return q.waiting > 0 && q.running < q.maxInFlight }

// done retransmits the frames read for req through em (see
// Sender.ColdDone).
func (q *coldQueue) done(req ColdRequest, frames []byte, now int64, em *emitter, out *batch.Vec) (rest []byte) {
	c := q.find(req)
	if c == nil {
		return nil // unknown or already finished request
	}
	end := req.From + uint64(req.Count)
	for len(frames) > 0 {
		_, p, n, err := wire.DecodeFrame(frames)
		if err != nil {
			q.stats.Bad.count(err, true)
			frames = nil
			break
		}
		seq := wire.Seq(p)
		if seq >= req.From && seq < end && len(p) >= 8 {
			if !em.emit(frames[:n], seq, out) {
				return frames
			}
			c.served++
			q.stats.RetxCold++
		}
		frames = frames[n:]
	}
	if c.served < req.Count {
		q.stats.ColdMissing += uint64(req.Count - c.served)
	}
	q.recent[q.recentNext] = coldServed{from: req.From, end: end, at: now}
	q.recentNext = (q.recentNext + 1) % coldRecentSlots
	q.finish(c)
	return nil
}

// failed frees req's slot after a failed read.
func (q *coldQueue) failed(req ColdRequest) {
	if c := q.find(req); c != nil {
		q.finish(c)
		q.stats.ColdErrors++
	}
}

func (q *coldQueue) finish(c *coldSlot) {
	*c = coldSlot{}
	q.running--
}

func (q *coldQueue) find(req ColdRequest) *coldSlot {
	for j := range q.slots {
		c := &q.slots[j]
		if c.used && c.taken && c.req == req {
			return c
		}
	}
	return nil
}
