package protocol

// hotRing keeps the newest frames the Sender sent, byte for byte, so that
// a NAK for any of them is answered from memory without touching the WAL.
//
// Invariants: slot seq&mask holds seq's frame exactly when its seq field
// is seq (a slot never sent holds seq 0, which no record has); the frame
// is buf[i*size : i*size+n]; retxAt is when that frame was last
// retransmitted (never: not since it was cached). Caching a seq evicts
// whatever older seq shared its slot, so only the newest len(slots) seqs
// can be hits.
type hotRing struct {
	buf   []byte
	slots []hotSlot
	mask  uint64
	size  int // bytes per slot: MaxFrame rounded up to 64
}

type hotSlot struct {
	seq    uint64
	n      int32
	retxAt int64
}

func newHotRing(slots, maxFrame int) hotRing {
	r := hotRing{
		slots: make([]hotSlot, slots),
		mask:  uint64(slots - 1),
		size:  slotSize(maxFrame),
	}
	r.buf = make([]byte, slots*r.size)
	return r
}

// frameBuf is the n-byte buffer in which seq's frame is written; cache
// must follow once it holds the frame.
func (r *hotRing) frameBuf(seq uint64, n int) []byte {
	off := int(seq&r.mask) * r.size
	return r.buf[off : off+n]
}

// cache records that seq's slot holds its n-byte frame, not yet
// retransmitted.
func (r *hotRing) cache(seq uint64, n int) {
	r.slots[seq&r.mask] = hotSlot{seq: seq, n: int32(n), retxAt: never}
}

// put copies frame in as seq's and caches it, if it fits a slot.
func (r *hotRing) put(seq uint64, frame []byte) {
	if len(frame) > r.size {
		return
	}
	copy(r.frameBuf(seq, len(frame)), frame)
	r.cache(seq, len(frame))
}

// lookup returns seq's slot and frame, or nil when the ring no longer (or
// never) held it.
func (r *hotRing) lookup(seq uint64) (*hotSlot, []byte) {
	sl := &r.slots[seq&r.mask]
	if sl.seq != seq {
		return nil, nil
	}
	off := int(seq&r.mask) * r.size
	return sl, r.buf[off : off+int(sl.n)]
}

// capacity is the number of slots: seqs older than next−capacity cannot
// be hits.
func (r *hotRing) capacity() uint64 { return uint64(len(r.slots)) }
