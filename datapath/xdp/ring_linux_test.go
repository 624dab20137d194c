package xdp

import "testing"

// TestRxPoolAdapts: a hot set of lo frames is posted; a backlog of half
// the target quadruples it up to all frames; a stream keeps it; a long
// ping-pong spell halves it back to lo; posting never exceeds target nor
// hands out a frame twice.
func TestRxPoolAdapts(t *testing.T) {
	c := DefaultConfig()
	c.RxFrames, c.FillFrames = 1024, 64
	p := newRxPool(&c, 2048)
	fill := &addrRing{ring: ring{mask: 1023, size: 1024}, descs: make([]uint64, 1024)}
	p.post(fill)
	if p.posted != 64 || len(p.free) != 1024-64 || fill.cachedProd != 64 || fill.descs[0] != 0 {
		t.Fatalf("initial: posted %d, free %d, produced %d, first %d", p.posted, len(p.free), fill.cachedProd, fill.descs[0])
	}
	// The kernel filled 40 frames; the path consumes them and returns them.
	consume := func(k int) {
		for range k {
			addr := fill.descs[fill.cachedCons&fill.mask]
			fill.cachedCons++
			p.free = append(p.free, addr)
		}
		p.posted -= k
	}
	consume(40)
	p.adapt(40) // 40 ≥ 64/2: grow
	p.post(fill)
	if p.target != 256 || p.posted != 256 {
		t.Fatalf("after a backlog of 40: target %d posted %d", p.target, p.posted)
	}
	for _, want := range []int{1024, 1024} {
		consume(p.target / 2)
		p.adapt(uint32(p.target / 2))
		p.post(fill)
		if p.target != want || p.posted != min(want, 1024) {
			t.Fatalf("target %d posted %d, want %d", p.target, p.posted, want)
		}
	}
	// A stream (8 frames per poll) keeps the target.
	for range 3 * 4096 {
		consume(8)
		p.adapt(8)
		p.post(fill)
	}
	if p.target != 1024 {
		t.Fatalf("stream: target %d, want 1024", p.target)
	}
	// Ping-pong: each window of 4096 polls with backlog 1 halves it (the
	// first window still holds the stream's backlog).
	for _, want := range []int{1024, 512, 256, 128, 64, 64} {
		for range 4096 {
			consume(1)
			p.adapt(1)
			p.post(fill)
		}
		if p.target != want {
			t.Fatalf("quiet: target %d, want %d", p.target, want)
		}
	}
	// Every frame is either free or posted, none twice.
	seen := map[uint64]bool{}
	for _, a := range p.free {
		seen[a] = true
	}
	for i := fill.cachedCons; i != fill.cachedProd; i++ {
		if seen[fill.descs[i&fill.mask]] {
			t.Fatalf("frame %d both free and posted", fill.descs[i&fill.mask])
		}
		seen[fill.descs[i&fill.mask]] = true
	}
	if len(seen) != 1024 || p.posted != int(fill.cachedProd-fill.cachedCons) {
		t.Fatalf("%d distinct frames, posted %d vs ring %d", len(seen), p.posted, fill.cachedProd-fill.cachedCons)
	}
}
