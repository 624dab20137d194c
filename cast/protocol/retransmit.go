package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

// maxDeferred is how many NAKed ranges wait for batch room at most.
const maxDeferred = 64

type retxRange struct{ from, end uint64 }

func (s *Sender) serveNak(nak wal.Nak, now int64, out *batch.Vec) {
	from, count := nak.From, nak.Count
	if from == 0 {
		s.stats.NakNeverSent++
		if count == 0 {
			return
		}
		from, count = 1, count-1
	}
	if count == 0 {
		return
	}
	if count > uint64(s.cfg.RingSlots) {
		s.stats.NakClamped++
		count = uint64(s.cfg.RingSlots)
	}
	last := s.next - 1 // highest seq sent
	if from > last || count > last-from+1 {
		s.stats.NakNeverSent++
		// A negotiated receiver believes in seqs that do not exist (a
		// forged or stale announcement): tell it what does, at once.
		s.fc.probeNow = s.fc.active > 0
		if from > last {
			return
		}
		count = last - from + 1
	}
	end := from + count // exclusive; no overflow: end ≤ s.next
	if s.skip.seq != 0 && from < s.skip.seq && end > s.skip.from {
		// Seqs the log skipped have no record: the Skip marker answers
		// for them (and for itself).
		if from < s.skip.from {
			s.serveOrDefer(from, s.skip.from, now, out)
		}
		s.serveOrDefer(s.skip.seq, max(end, s.skip.seq+1), now, out)
		return
	}
	s.serveOrDefer(from, end, now, out)
}

func (s *Sender) serveOrDefer(from, end uint64, now int64, out *batch.Vec) {
	if len(s.retx) > 0 {
		// Earlier retransmits still wait for room: queue behind them.
		s.deferRetx(from, end)
		return
	}
	if seq := s.serveRange(from, end, now, out); seq < end {
		s.deferRetx(seq, end)
	}
}

// serveRange retransmits seqs from … end−1: hot hits into out, misses
// queued as cold reads. It returns end, or the seq at which out filled.
func (s *Sender) serveRange(from, end uint64, now int64, out *batch.Vec) uint64 {
	// Seqs more than RingSlots behind the next one cannot be in the ring
	// (their slot holds a newer seq): queue them without walking the
	// ring, so a NAK for old seqs costs O(1) here, flood or not.
	if ring := uint64(s.cfg.RingSlots); s.next > ring && from < s.next-ring {
		oldEnd := min(end, s.next-ring)
		s.queueCold(from, oldEnd-from, now)
		from = oldEnd
	}
	var coldFrom uint64
	for seq := from; seq < end; seq++ {
		i := seq & s.mask
		if s.slotSeq[i] != seq {
			if coldFrom == 0 {
				coldFrom = seq
			}
			continue
		}
		if coldFrom != 0 {
			s.queueCold(coldFrom, seq-coldFrom, now)
			coldFrom = 0
		}
		if s.dedup > 0 && now-s.retxAt[i] < s.dedup {
			s.stats.RetxDedup++
			continue
		}
		off := int(i) * s.slot
		if !s.emit(s.ring[off:off+int(s.slotLen[i])], seq, out) {
			return seq
		}
		s.retxAt[i] = now
		s.stats.RetxHot++
	}
	if coldFrom != 0 {
		s.queueCold(coldFrom, end-coldFrom, now)
	}
	return end
}

// deferRetx remembers a NAKed range that did not fit in the batch; Tick
// continues it. Ranges beyond maxDeferred are dropped and counted (the
// receiver asks again).
func (s *Sender) deferRetx(from, end uint64) {
	s.stats.RetxDeferred++
	if len(s.retx) == cap(s.retx) {
		s.stats.RetxDropped += end - from
		return
	}
	s.retx = append(s.retx, retxRange{from, end})
}

// RetxPending reports whether NAKed retransmits wait for room in the
// batch: the loop flushes and calls Tick again without waiting.
func (s *Sender) RetxPending() bool { return len(s.retx) > 0 }

func (s *Sender) drainRetx(now int64, out *batch.Vec) {
	k := 0
	for k < len(s.retx) {
		r := &s.retx[k]
		seq := s.serveRange(r.from, r.end, now, out)
		if seq < r.end {
			r.from = seq
			break
		}
		k++
	}
	if k > 0 {
		n := copy(s.retx, s.retx[k:])
		s.retx = s.retx[:n]
	}
}
