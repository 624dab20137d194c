package cast

import (
	"errors"
	"sync/atomic"

	"github.com/walcast/walcast/cast/protocol"
)

// ErrRingFull is returned by [Ring.Push] when every slot is in use.
var ErrRingFull = errors.New("cast: ring full")

// Ring is a bounded single-producer, single-consumer queue of records
// (type + payload bytes) in preallocated slots. One goroutine pushes,
// one other goroutine pops; neither blocks nor allocates. It carries
// records between the loop's pinned thread and the application.
type Ring struct {
	_    [64]byte
	head atomic.Uint64 // next slot to pop; written by the consumer
	_    [56]byte
	tail atomic.Uint64 // next slot to push; written by the producer
	_    [56]byte

	mask  uint64
	slot  int
	data  []byte
	lens  []int32
	types []uint16
	seqs  []uint64
}

// NewRing returns a Ring of n slots (rounded up to a power of two) of up
// to slot bytes each.
func NewRing(n, slot int) *Ring {
	if n < 2 {
		n = 2
	}
	size := 1
	for size < n {
		size <<= 1
	}
	if slot < 1 {
		slot = 1
	}
	return &Ring{
		mask:  uint64(size - 1),
		slot:  slot,
		data:  make([]byte, size*slot),
		lens:  make([]int32, size),
		types: make([]uint16, size),
		seqs:  make([]uint64, size),
	}
}

// Cap is the number of slots.
func (r *Ring) Cap() int { return int(r.mask + 1) }

// SlotSize is the largest payload a slot holds, bytes.
func (r *Ring) SlotSize() int { return r.slot }

// Len is the number of records queued (a snapshot).
func (r *Ring) Len() int { return int(r.tail.Load() - r.head.Load()) }

// Free is the number of free slots (a snapshot; exact for the producer).
func (r *Ring) Free() int { return r.Cap() - r.Len() }

// Push copies a record into the next slot (producer only). It returns
// ErrRingFull when no slot is free and ErrFrameTooLarge when payload does
// not fit a slot.
func (r *Ring) Push(typ uint16, seq uint64, payload []byte) error {
	if len(payload) > r.slot {
		return protocol.ErrFrameTooLarge
	}
	t := r.tail.Load()
	if t-r.head.Load() > r.mask {
		return ErrRingFull
	}
	i := t & r.mask
	copy(r.data[int(i)*r.slot:], payload)
	r.lens[i] = int32(len(payload))
	r.types[i] = typ
	r.seqs[i] = seq
	r.tail.Store(t + 1) // publishes the slot (release)
	return nil
}

// Peek returns the oldest record without removing it (consumer only).
// payload aliases the slot and is valid until Pop. ok is false when the
// ring is empty.
func (r *Ring) Peek() (typ uint16, seq uint64, payload []byte, ok bool) {
	h := r.head.Load()
	if h == r.tail.Load() {
		return 0, 0, nil, false
	}
	i := h & r.mask
	off := int(i) * r.slot
	return r.types[i], r.seqs[i], r.data[off : off+int(r.lens[i])], true
}

// Pop removes the oldest record (consumer only, after Peek returned ok).
func (r *Ring) Pop() { r.head.Add(1) }

// peekRun fills dst with the oldest records that share the oldest one's
// type, at most len(dst), without removing them (consumer only), and
// returns how many and their type. The payloads alias their slots and
// are valid until popped.
func (r *Ring) peekRun(dst [][]byte) (n int, typ uint16) {
	h, t := r.head.Load(), r.tail.Load()
	for ; n < len(dst) && h+uint64(n) != t; n++ {
		i := (h + uint64(n)) & r.mask
		if n == 0 {
			typ = r.types[i]
		} else if r.types[i] != typ {
			break
		}
		off := int(i) * r.slot
		dst[n] = r.data[off : off+int(r.lens[i])]
	}
	return n, typ
}

// popN removes the n oldest records (consumer only, n ≤ Len()).
func (r *Ring) popN(n int) { r.head.Add(uint64(n)) }
