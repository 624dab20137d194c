package protocol

import (
	"testing"

	"github.com/walcast/walcast/wire"
)

// TestReorderRing drives the ring directly: a seq is held only in its
// own slot, a seq one ring later replaces it (the Receiver never stores
// both), frame returns what put stored, drop empties the slot.
func TestReorderRing(t *testing.T) {
	q := newReorderRing(8, 100)
	if q.size != 128 || len(q.buf) != 8*128 {
		t.Fatalf("slot %d bytes, buf %d; want 128, 1024", q.size, len(q.buf))
	}
	for _, c := range []struct {
		name string
		n    int
		fits bool
	}{{"small", 24, true}, {"slot size", 128, true}, {"larger than a slot", 129, false}} {
		if got := q.fits(c.n); got != c.fits {
			t.Errorf("%s: fits(%d) = %v, want %v", c.name, c.n, got, c.fits)
		}
	}
	steps := []struct {
		name string
		put  uint64 // 0: none
		drop uint64 // slot to drop, with dropAt
		drp  bool
		has  []uint64
		not  []uint64
	}{
		{name: "empty", not: []uint64{1, 7, 8}}, // seq 0 marks an empty slot: never asked
		{name: "put 6", put: 6, has: []uint64{6}, not: []uint64{14, 5, 7}},
		{name: "put 9 wraps to slot 1", put: 9, has: []uint64{6, 9}, not: []uint64{1, 17}},
		{name: "put 14 replaces 6", put: 14, has: []uint64{9, 14}, not: []uint64{6}},
		{name: "drop slot 1", drop: 1, drp: true, has: []uint64{14}, not: []uint64{9}},
	}
	for _, st := range steps {
		if st.put != 0 {
			q.put(st.put, frame(st.put, 16+int(st.put)))
		}
		if st.drp {
			q.drop(st.drop)
		}
		for _, s := range st.has {
			if !q.has(s) {
				t.Errorf("%s: has(%d) false", st.name, s)
				continue
			}
			h, p := q.frame(s & q.mask)
			if h.Type != 100 || wire.Seq(p) != s || len(p) != 16+int(s) {
				t.Errorf("%s: frame of %d: type %d seq %d len %d", st.name, s, h.Type, wire.Seq(p), len(p))
			}
		}
		for _, s := range st.not {
			if q.has(s) {
				t.Errorf("%s: has(%d) true", st.name, s)
			}
		}
	}
}
