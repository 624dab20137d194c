package protocol

import "github.com/walcast/walcast/batch"

// retransmitter answers NAKed ranges: hits from the hot ring (passed in
// by the Sender) into the batch through the emitter, misses queued for
// cold reads, and ranges that did not fit in the batch continued on a
// later Tick.
//
// Invariants: a hot slot is retransmitted at most once per dedup ns (its
// retxAt); deferred ranges are served oldest first, and while any waits a
// new range queues behind it, so retransmits go out in NAK order; a
// deferred range holds no seq that another one holds at either end of it
// (a NAK for waiting seqs adds nothing); at most maxDeferred ranges wait
// (the seqs of further ones are dropped and counted, the receiver asks
// again). dedup is set by the flow controller
// (flowController.fold): RetxDedupWindow, or below every receiver's
// re-NAK delay.
type retransmitter struct {
	cold     coldQueue
	dedup    int64       // ns; ≤ 0: no dedup
	deferred []retxRange // NAKed ranges waiting for room in the batch
	stats    *SenderStats
}

// maxDeferred is how many NAKed ranges wait for batch room at most.
const maxDeferred = 64

type retxRange struct{ from, end uint64 }

// serve retransmits from … end−1 from ring through em, or defers it
// behind ranges that wait. next is the Sender's next seq.
func (t *retransmitter) serve(ring *hotRing, em *emitter, from, end, next uint64, now int64, out *batch.Vec) {
	if len(t.deferred) > 0 {
		// Earlier retransmits still wait for room: queue behind them.
		t.deferRange(from, end)
		return
	}
	if seq := t.serveRange(ring, em, from, end, next, now, out); seq < end {
		t.deferRange(seq, end)
	}
}

// serveRange retransmits seqs from … end−1: hot hits into out, misses
// queued as cold reads. It returns end, or the seq at which out filled.
func (t *retransmitter) serveRange(ring *hotRing, em *emitter, from, end, next uint64, now int64, out *batch.Vec) uint64 {
	// Seqs more than the ring's capacity behind the next one cannot be in
	// it (their slot holds a newer seq): queue them without walking the
	// ring, so a NAK for old seqs costs O(1) here, flood or not.
	if c := ring.capacity(); next > c && from < next-c {
		oldEnd := min(end, next-c)
		t.cold.queue(from, oldEnd-from, now, t.dedup)
		from = oldEnd
	}
	var coldFrom uint64
	for seq := from; seq < end; seq++ {
		sl, frame := ring.lookup(seq)
		if sl == nil {
			if coldFrom == 0 {
				coldFrom = seq
			}
			continue
		}
		if coldFrom != 0 {
			t.cold.queue(coldFrom, seq-coldFrom, now, t.dedup)
			coldFrom = 0
		}
		if t.dedup > 0 && now-sl.retxAt < t.dedup {
			t.stats.RetxDedup++
			continue
		}
		if !em.emit(frame, seq, out) {
			return seq
		}
		sl.retxAt = now
		t.stats.RetxHot++
	}
	if coldFrom != 0 {
		t.cold.queue(coldFrom, end-coldFrom, now, t.dedup)
	}
	return end
}

// deferRange remembers a NAKed range that did not fit in the batch: the
// part of it that no waiting range covers, joined to a waiting range it
// adjoins. A NAK repeated while its range waits (a receiver's re-NAK, a
// flood of NAK{1, 2^64−1} from the receiver's address) adds nothing, so
// the waiting ranges hold about one ring of seqs, not maxDeferred copies
// of one range that leave no room for the NAK of a real loss.
func (t *retransmitter) deferRange(from, end uint64) {
	t.stats.RetxDeferred++
	// Clip until no waiting range holds from or end−1 (a waiting range
	// strictly inside [from, end) stays: the dedup window keeps its seqs
	// from going out twice).
	for clipped := true; clipped; {
		clipped = false
		for i := range t.deferred {
			r := &t.deferred[i]
			if from >= r.from && from < r.end {
				from, clipped = r.end, true
			}
			if end > r.from && end <= r.end {
				end, clipped = r.from, true
			}
			if from >= end {
				return
			}
		}
	}
	for i := range t.deferred {
		if r := &t.deferred[i]; r.end == from {
			r.end = end
			return
		} else if r.from == end {
			r.from = from
			return
		}
	}
	if len(t.deferred) == cap(t.deferred) {
		t.stats.RetxDropped += end - from
		return
	}
	t.deferred = append(t.deferred, retxRange{from, end})
}

// pending reports whether deferred ranges wait for room.
func (t *retransmitter) pending() bool { return len(t.deferred) > 0 }

// drain continues the deferred ranges until out fills.
func (t *retransmitter) drain(ring *hotRing, em *emitter, next uint64, now int64, out *batch.Vec) {
	k := 0
	for k < len(t.deferred) {
		r := &t.deferred[k]
		seq := t.serveRange(ring, em, r.from, r.end, next, now, out)
		if seq < r.end {
			r.from = seq
			break
		}
		k++
	}
	if k > 0 {
		n := copy(t.deferred, t.deferred[k:])
		t.deferred = t.deferred[:n]
	}
}
