package protocol

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestHotRingKeepsNewest writes frames of random sizes (up to MaxFrame)
// through the hot ring's byte buffer, wrapping it many times: after each
// one, the newest RingSlots frames are hits with their own bytes, older
// seqs are misses, and each frame starts where the one before it ended
// unless it wrapped to the start.
func TestHotRingKeepsNewest(t *testing.T) {
	const slots, maxFrame = 16, 300
	r := newHotRing(slots, maxFrame)
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := map[uint64]int{}
	var prevEnd uintptr
	for seq := uint64(1); seq <= 2000; seq++ {
		n := 24 + rng.IntN(maxFrame-24+1)
		f := r.frameBuf(seq, n)
		if start := uintptr(unsafe.Pointer(&f[0])); seq > 1 && start != prevEnd && start != uintptr(unsafe.Pointer(&r.buf[0])) {
			t.Fatalf("seq %d: frame neither follows the last one nor starts the buffer", seq)
		}
		prevEnd = uintptr(unsafe.Pointer(&f[0])) + uintptr(n)
		for i := range f {
			f[i] = byte(seq)
		}
		binary.LittleEndian.PutUint64(f, seq)
		r.cache(seq, n)
		sizes[seq] = n
		for s := max(seq, slots) - slots + 1; s <= seq; s++ {
			sl, fr := r.lookup(s)
			if sl == nil || len(fr) != sizes[s] || binary.LittleEndian.Uint64(fr) != s || fr[len(fr)-1] != byte(s) && len(fr) > 8 {
				t.Fatalf("after seq %d: seq %d not intact", seq, s)
			}
		}
		if seq > slots {
			if sl, _ := r.lookup(seq - slots); sl != nil {
				t.Fatalf("after seq %d: seq %d still a hit", seq, seq-slots)
			}
		}
	}
}
