package protocol

import (
	"github.com/walcast/walcast/wire"
)

// reorderRing holds the records that arrived ahead of the next expected
// seq until the ones before them are in. A slot is size bytes (MaxFrame
// rounded up to 64), the whole ring one allocation made in NewReceiver.
//
// Invariants: slot i holds seq s only when s ≡ i (mod ReorderSlots), its
// frame in buf[i*size : i*size+n] with n ≤ size; seq 0 marks an empty
// slot. The Receiver stores only seqs in expected+1 …
// expected+ReorderSlots−1, so no two stored seqs share a slot.
type reorderRing struct {
	slots []ringSlot
	buf   []byte
	size  int
	mask  uint64
}

// ringSlot is what slot i of the ring holds: the frame of seq in
// buf[i*size : i*size+n].
type ringSlot struct {
	seq uint64 // 0: empty
	n   int32
}

func newReorderRing(slots, maxFrame int) reorderRing {
	size := slotSize(maxFrame)
	return reorderRing{
		slots: make([]ringSlot, slots),
		buf:   make([]byte, slots*size),
		size:  size,
		mask:  uint64(slots - 1),
	}
}

// has reports whether the ring holds seq.
func (q *reorderRing) has(seq uint64) bool { return q.slots[seq&q.mask].seq == seq }

// fits reports whether a frame of n bytes fits a slot.
func (q *reorderRing) fits(n int) bool { return n <= q.size }

// put stores frame (it must fit) as seq, replacing what its slot held.
func (q *reorderRing) put(seq uint64, frame []byte) {
	i := seq & q.mask
	copy(q.buf[int(i)*q.size:], frame)
	q.slots[i] = ringSlot{seq: seq, n: int32(len(frame))}
}

// frame returns the header and payload of the record stored in slot i;
// they alias the ring until the slot is reused.
func (q *reorderRing) frame(i uint64) (wire.Header, []byte) {
	off := int(i) * q.size
	f := q.buf[off : off+int(q.slots[i].n)]
	h, _ := wire.ParseHeader(f)
	return h, f[wire.HeaderSize:]
}

// drop empties slot i.
func (q *reorderRing) drop(i uint64) { q.slots[i] = ringSlot{} }
