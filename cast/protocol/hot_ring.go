package protocol

// hotRing keeps the newest frames the Sender sent, byte for byte, so that
// a NAK for any of them is answered from memory without touching the WAL.
// Frames are written back to back in one buffer, in seq order, so that a
// batch of first sends is one run of memory the kernel copies in one
// piece (batch.Tx joins adjacent views into one iovec).
//
// Invariants: slot seq&mask holds seq's frame exactly when its seq field
// is seq (a slot never sent holds seq 0, which no record has); the frame
// is buf[off : off+n]; retxAt is when that frame was last retransmitted
// (never: not since it was cached). Frames are written at head, or at 0
// when one does not fit before the end; buf holds len(slots)+1 frames of
// size bytes, so the newest len(slots) frames (at most one wrap's gap
// among them) are never overwritten: caching a seq evicts whatever older
// seq shared its slot, and only the newest len(slots) seqs can be hits.
type hotRing struct {
	buf   []byte
	slots []hotSlot
	mask  uint64
	size  int // bytes per frame at most: MaxFrame rounded up to 64
	head  int // where the next frame is written
	pend  int // offset of the frame frameBuf last handed out
}

type hotSlot struct {
	seq    uint64
	off    int
	n      int32
	retxAt int64
}

func newHotRing(slots, maxFrame int) hotRing {
	r := hotRing{
		slots: make([]hotSlot, slots),
		mask:  uint64(slots - 1),
		size:  slotSize(maxFrame),
	}
	r.buf = make([]byte, (slots+1)*r.size)
	return r
}

// frameBuf is the n-byte buffer in which seq's frame is written, after
// the previous one; cache must follow once it holds the frame.
func (r *hotRing) frameBuf(seq uint64, n int) []byte {
	off := r.head
	if off+n > len(r.buf) {
		off = 0
	}
	r.pend = off
	return r.buf[off : off+n]
}

// cache records that seq's frame, n bytes, is in the buffer frameBuf
// handed out last, not yet retransmitted.
func (r *hotRing) cache(seq uint64, n int) {
	r.slots[seq&r.mask] = hotSlot{seq: seq, off: r.pend, n: int32(n), retxAt: never}
	r.head = r.pend + n
}

// put copies frame in as seq's (the newest seq) and caches it, if it
// fits a slot.
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
	return sl, r.buf[sl.off : sl.off+int(sl.n)]
}

// capacity is the number of slots: seqs older than next−capacity cannot
// be hits.
func (r *hotRing) capacity() uint64 { return uint64(len(r.slots)) }
