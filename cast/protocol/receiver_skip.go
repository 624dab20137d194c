package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// skipHole is a Skip marker buffered while records before its hole are
// missing. Invariant: from ≠ 0 exactly while one waits; the seqs
// from … to (empty when to < from) have no record and are never NAKed,
// and the marker itself (seq to+1) is in the reorder ring.
type skipHole struct {
	from, to uint64
	marker   SkipNotice
}

// wait makes the marker wait for the records before its hole
// from … to.
func (h *skipHole) wait(from, to uint64, marker SkipNotice) {
	h.from, h.to, h.marker = from, to, marker
}

// clear forgets the waiting marker, if any.
func (h *skipHole) clear() { h.from, h.to = 0, 0 }

// holds reports whether seq lies in the hole of a waiting marker: it has
// no record.
func (h *skipHole) holds(seq uint64) bool { return h.from != 0 && seq >= h.from && seq <= h.to }

// differs reports whether a marker waits whose hole starts elsewhere
// than from.
func (h *skipHole) differs(from uint64) bool { return h.from != 0 && h.from != from }

// jump reports, once every seq before the hole is delivered (expected
// is its first), the seq after the hole, and forgets the hole (marker
// still says what the marker meant).
func (h *skipHole) jump(expected uint64) (next uint64, ok bool) {
	if h.from == 0 || expected != h.from {
		return 0, false
	}
	next = h.to + 1
	h.clear()
	return next, true
}

// skipMarker applies a Skip marker at seq: the seqs sk.From … seq−1 have
// no record. When every seq before them is delivered (sk.From ≤
// expected) the stream jumps to the marker at once, dropping what was
// buffered in between and noting the seqs it had delivered in that range;
// otherwise the marker is buffered and the jump waits until the records
// before the hole are in (they are NAKed, the hole is not). The marker is
// delivered in its place in seq order.
func (r *Receiver) skipMarker(h wire.Header, p, frame []byte, seq uint64, now int64, out *batch.Vec, deliver func(wire.Header, []byte)) {
	sk, err := wire.ParseSkip(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	if seq < r.expected {
		r.stats.Duplicates++
		return
	}
	if sk.From > r.expected {
		// Records before the hole are still missing.
		if seq-r.expected >= r.window || r.hole.differs(sk.From) {
			r.reconnect(seq, now)
			return
		}
		i := seq & r.mask
		if r.ring.has(seq) || !r.ring.fits(len(frame)) {
			r.stats.Duplicates++
			return
		}
		r.hole.wait(sk.From, seq-1, SkipNotice{Skip: sk})
		r.ring.put(seq, frame)
		r.loss.found(i)
		r.stats.Buffered++
		r.raise(sk.From-1, false, now, out)
		r.highest = max(r.highest, seq)
		if now >= r.loss.nextDue {
			r.pump(now, out)
		}
		return
	}
	n := SkipNotice{Skip: sk}
	if r.expected > sk.From {
		n.LostFrom, n.LostTo = sk.From, r.expected-1
		r.stats.SkipLost += r.expected - sk.From
	}
	for q := r.expected; q < seq && q-r.expected < r.window; q++ {
		i := q & r.mask
		if r.ring.has(q) {
			r.stats.SkipDiscarded++
		}
		r.clear(i)
	}
	r.hole.clear()
	r.expected = seq
	r.lastSkip = n
	r.stats.Skips++
	r.raise(seq, true, now, out)
	r.stats.Delivered++
	r.clear(seq & r.mask)
	r.expected++
	r.live = seq
	r.lateDelivery(now)
	r.event(SkipApplied, now, 0, n)
	deliver(h, p)
	r.drain(now, deliver)
	if now >= r.loss.nextDue {
		r.pump(now, out)
	}
}
