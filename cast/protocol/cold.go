package protocol

import (
	"math"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

// ColdRequest asks the loop to read Count consecutive records starting at
// From from the WAL (off the hot thread) and hand the frames back through
// [Sender.ColdDone] (or [Sender.ColdFailed]).
type ColdRequest struct {
	From  uint64
	Count int
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

// queueCold queues [from, from+n) for a cold read, skipping seqs already
// covered by a queued or running request or served within the dedup
// window, splitting by MaxColdRecords and spending the cold budget.
func (s *Sender) queueCold(from, n uint64, now int64) {
	if s.log == nil {
		s.stats.ColdRejected += n
		return
	}
	s.refillCold(now)
	end := from + n
	for from < end {
		if s.coldTokens < 1e9 {
			s.stats.ColdOverBudget += end - from
			return
		}
		// Skip the prefix covered by an existing request or a recent serve.
		if c := s.coveredUntil(from, now); c > from {
			if c > end {
				c = end
			}
			s.stats.ColdDedup += c - from
			from = c
			continue
		}
		k := end - from
		if k > uint64(s.cfg.MaxColdRecords) {
			k = uint64(s.cfg.MaxColdRecords)
		}
		// Stop before the next covered seq so requests never overlap.
		if c := s.nextCovered(from, now); c < from+k {
			k = c - from
		}
		if budget := uint64(s.coldTokens / 1e9); k > budget {
			k = budget
		}
		slot := -1
		for j := range s.cold {
			if !s.cold[j].used {
				slot = j
				break
			}
		}
		if slot < 0 {
			s.stats.ColdRejected += end - from
			return
		}
		s.cold[slot] = coldSlot{req: ColdRequest{From: from, Count: int(k)}, used: true}
		s.coldTokens -= int64(k) * 1e9
		s.stats.ColdQueued++
		from += k
	}
}

// refillCold adds the cold budget earned since the last refill.
func (s *Sender) refillCold(now int64) {
	if s.coldAt == never {
		s.coldAt = now
		return
	}
	el := now - s.coldAt
	if el <= 0 {
		return
	}
	s.coldAt = now
	if room := s.coldFull - s.coldTokens; el >= room/s.cfg.ColdRate+1 {
		s.coldTokens = s.coldFull
	} else {
		s.coldTokens += el * s.cfg.ColdRate
	}
}

// coveredUntil returns the end (exclusive) of the queued or running
// request, or of the range served within the dedup window, that covers
// seq; 0 if none does.
func (s *Sender) coveredUntil(seq uint64, now int64) uint64 {
	for j := range s.cold {
		c := &s.cold[j]
		if c.used && seq >= c.req.From && seq < c.req.From+uint64(c.req.Count) {
			return c.req.From + uint64(c.req.Count)
		}
	}
	for j := range s.recent {
		r := &s.recent[j]
		if seq >= r.from && seq < r.end && now-r.at < s.dedup {
			return r.end
		}
	}
	return 0
}

// nextCovered returns the lowest seq above from at which a queued or
// running request, or a range served within the dedup window, begins
// (MaxUint64 if none).
func (s *Sender) nextCovered(from uint64, now int64) uint64 {
	next := uint64(math.MaxUint64)
	for j := range s.cold {
		if c := &s.cold[j]; c.used && c.req.From > from && c.req.From < next {
			next = c.req.From
		}
	}
	for j := range s.recent {
		if r := &s.recent[j]; r.from > from && r.from < next && now-r.at < s.dedup {
			next = r.from
		}
	}
	return next
}

// ColdRequests copies queued cold reads into dst, lowest seqs first (the
// receiver delivers in order), marks them running and returns how many
// it copied: at most MaxColdInFlight are running at once. The loop reads
// each on its I/O goroutine (e.g. with wal.Writer.ReadRange) and reports
// back with ColdDone or ColdFailed on the Sender's goroutine.
func (s *Sender) ColdRequests(dst []ColdRequest) int {
	n := 0
	for n < len(dst) && s.running < s.cfg.MaxColdInFlight {
		best := -1
		for j := range s.cold {
			c := &s.cold[j]
			if c.used && !c.taken && (best < 0 || c.req.From < s.cold[best].req.From) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		s.cold[best].taken = true
		s.running++
		dst[n] = s.cold[best].req
		n++
	}
	return n
}

// ColdPending reports whether cold requests wait to be taken by
// ColdRequests and one may be taken now.
func (s *Sender) ColdPending() bool {
	if s.running >= s.cfg.MaxColdInFlight {
		return false
	}
	for j := range s.cold {
		if s.cold[j].used && !s.cold[j].taken {
			return true
		}
	}
	return false
}

// ColdDone hands back frames read for req: consecutive whole frames as
// stored in the WAL. Each valid data frame whose seq lies in req is
// appended to out as a retransmit. When out fills, ColdDone returns the
// frames not yet sent (a sub-slice of frames); the loop flushes out and
// calls ColdDone again with them. The request is finished, and its
// in-flight slot freed, when the returned slice is empty. Records the WAL
// did not return are counted as ColdMissing.
func (s *Sender) ColdDone(req ColdRequest, frames []byte, now int64, out *batch.Vec) (rest []byte) {
	c := s.findCold(req)
	if c == nil {
		return nil // unknown or already finished request
	}
	end := req.From + uint64(req.Count)
	for len(frames) > 0 {
		_, p, n, err := wal.DecodeFrame(frames)
		if err != nil {
			s.stats.Bad.count(err, true)
			frames = nil
			break
		}
		seq := wal.Seq(p)
		if seq >= req.From && seq < end && len(p) >= 8 {
			if !s.emit(frames[:n], seq, out) {
				return frames
			}
			c.served++
			s.stats.RetxCold++
		}
		frames = frames[n:]
	}
	if c.served < req.Count {
		s.stats.ColdMissing += uint64(req.Count - c.served)
	}
	s.recent[s.recentNext] = coldServed{from: req.From, end: end, at: now}
	s.recentNext = (s.recentNext + 1) % coldRecentSlots
	s.finishCold(c)
	return nil
}

// ColdFailed reports that the read for req failed; its slot is freed and
// the receiver will ask again.
func (s *Sender) ColdFailed(req ColdRequest) {
	if c := s.findCold(req); c != nil {
		s.finishCold(c)
		s.stats.ColdErrors++
	}
}

func (s *Sender) finishCold(c *coldSlot) {
	*c = coldSlot{}
	s.running--
}

func (s *Sender) findCold(req ColdRequest) *coldSlot {
	for j := range s.cold {
		c := &s.cold[j]
		if c.used && c.taken && c.req == req {
			return c
		}
	}
	return nil
}
