package protocol

import (
	"bytes"
	"testing"
)

// TestHotRing: a slot holds the newest seq cached in it, byte for byte,
// not yet retransmitted; an older seq of the same slot is gone, a frame
// larger than a slot is not kept.
func TestHotRing(t *testing.T) {
	r := newHotRing(4, 100)
	if r.capacity() != 4 || r.size != 128 {
		t.Fatalf("capacity %d, slot %d bytes", r.capacity(), r.size)
	}
	for _, c := range []struct {
		name string
		put  uint64
		n    int // payload bytes of the frame put
		hits []uint64
		miss []uint64
	}{
		{name: "empty", miss: []uint64{1, 4}},
		{name: "put 3", put: 3, n: 20, hits: []uint64{3}, miss: []uint64{7, 2}},
		{name: "put 6 (slot 2)", put: 6, n: 30, hits: []uint64{3, 6}, miss: []uint64{2}},
		{name: "put 7 evicts 3", put: 7, n: 40, hits: []uint64{6, 7}, miss: []uint64{3}},
		{name: "too large for a slot: not kept", put: 11, n: 128, hits: []uint64{6, 7}, miss: []uint64{11}},
	} {
		if c.put != 0 {
			r.put(c.put, frame(c.put, c.n))
		}
		for _, s := range c.hits {
			sl, f := r.lookup(s)
			if sl == nil || sl.retxAt != never || !bytes.Equal(f, frame(s, len(f)-16)) {
				t.Errorf("%s: lookup(%d) = %+v %x", c.name, s, sl, f)
			}
		}
		for _, s := range c.miss {
			if sl, f := r.lookup(s); sl != nil || f != nil {
				t.Errorf("%s: lookup(%d) hit", c.name, s)
			}
		}
	}
	// Writing in place (frameBuf, then cache), as Send does.
	copy(r.frameBuf(9, 24), frame(9, 8))
	r.cache(9, 24)
	if sl, f := r.lookup(9); sl == nil || !bytes.Equal(f, frame(9, 8)) {
		t.Fatalf("frameBuf+cache: %+v %x", sl, f)
	}
}
