package xdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is the shared part of one single-producer single-consumer AF_XDP
// ring: the kernel and we each own one index. Indexes are free-running
// uint32 counters; a slot is index & mask.
type ring struct {
	prod, cons *uint32 // shared with the kernel
	flags      *uint32
	mask       uint32
	size       uint32
	// Our cached view of both indexes. For a ring we produce, cachedProd is
	// ours and cachedCons the last value loaded from the kernel; for a ring
	// we consume, the other way round.
	cachedProd, cachedCons uint32
	mem                    []byte // the mmap'd ring
}

// mapRing maps ring number pgoff of fd with n descriptors of descSize bytes.
func mapRing(fd int, off *unix.XDPRingOffset, pgoff int64, n, descSize uint32, name string) (ring, unsafe.Pointer, error) {
	length := int(off.Desc) + int(n*descSize)
	mem, err := unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, nil, fmt.Errorf("xdp: mmap %s ring: %w", name, err)
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	r := ring{
		prod:  (*uint32)(unsafe.Add(base, off.Producer)),
		cons:  (*uint32)(unsafe.Add(base, off.Consumer)),
		flags: (*uint32)(unsafe.Add(base, off.Flags)),
		mask:  n - 1,
		size:  n,
		mem:   mem,
	}
	r.cachedProd = atomic.LoadUint32(r.prod)
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r, unsafe.Add(base, off.Desc), nil
}

func (r *ring) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}

// needWakeup reports whether the kernel asked for a syscall on this ring.
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// free returns how many slots we can produce, loading the kernel's consumer
// index (acquire) only when the cached view has fewer than want.
func (r *ring) free(want uint32) uint32 {
	f := r.size - (r.cachedProd - r.cachedCons)
	if f >= want {
		return f
	}
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r.size - (r.cachedProd - r.cachedCons)
}

// publish makes slots up to cachedProd visible to the kernel (release).
func (r *ring) publish() { atomic.StoreUint32(r.prod, r.cachedProd) }

// avail returns how many slots we can consume, loading the kernel's
// producer index (acquire) when the cached view is empty.
func (r *ring) avail() uint32 {
	a := r.cachedProd - r.cachedCons
	if a == 0 {
		r.cachedProd = atomic.LoadUint32(r.prod)
		a = r.cachedProd - r.cachedCons
	}
	return a
}

// release hands consumed slots up to cachedCons back to the kernel.
func (r *ring) release() { atomic.StoreUint32(r.cons, r.cachedCons) }

// addrRing is the fill or completion ring: UMEM addresses.
type addrRing struct {
	ring
	descs []uint64
}

// descRing is the RX or TX ring: (address, length, options) descriptors.
type descRing struct {
	ring
	descs []unix.XDPDesc
}

// consLoad loads the kernel's consumer index of a ring we produce (acquire).
func (r *ring) consLoad() uint32 { return atomic.LoadUint32(r.cons) }

// rxPool keeps the RX frames. The kernel takes fill-ring frames in the
// order they were posted, so with every RX frame posted each datagram lands
// in the frame used RxFrames datagrams ago: cold in the CPU caches and, in
// a VM with nested paging, in the TLB too (each miss a two-dimensional page
// walk). So the pool keeps only target frames posted, refilled from a LIFO
// stack of the frames just consumed: a small hot set while receiving is
// light. A backlog of target/2 or more on one poll quadruples target (up
// to all RX frames), so a stream soon finds buffers for bursts; it halves
// again, down to lo, only after 4096 non-empty polls that each found fewer
// than 4 frames: ping-pong, not a stream.
type rxPool struct {
	free   []uint64 // frames neither posted nor waiting in an RX ring (LIFO)
	posted int      // frames the kernel holds: in the fill ring or an RX ring
	target int
	lo, hi int
	polls  int    // non-empty polls since target last changed or decayed
	peak   uint32 // largest backlog in them
}

// quietBacklog: polls finding fewer frames than this are ping-pong.
const quietBacklog = 4

func newRxPool(c *Config, frameLen uint64) *rxPool {
	lo := c.FillFrames
	if lo == 0 {
		lo = DefaultFillFrames
	}
	lo = max(1, min(lo, c.RxFrames))
	p := &rxPool{free: make([]uint64, 0, c.RxFrames), target: lo, lo: lo, hi: c.RxFrames}
	for i := c.RxFrames - 1; i >= 0; i-- { // pop order: frame 0 first
		p.free = append(p.free, uint64(i)*frameLen)
	}
	return p
}

// adapt grows or shrinks target from the backlog seen on a non-empty poll.
func (p *rxPool) adapt(backlog uint32) {
	if int(backlog) >= p.target/2 && p.target < p.hi {
		p.target = min(p.hi, 4*p.target)
		p.polls, p.peak = 0, 0
		return
	}
	p.polls++
	p.peak = max(p.peak, backlog)
	if p.polls >= 4096 {
		if p.peak < quietBacklog && p.target > p.lo {
			p.target = max(p.lo, p.target/2)
		}
		p.polls, p.peak = 0, 0
	}
}

// post tops the kernel's frames up to target from the free stack (the
// caller publishes the fill ring).
func (p *rxPool) post(fill *addrRing) {
	for p.posted < p.target && len(p.free) > 0 {
		fill.descs[fill.cachedProd&fill.mask] = p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		fill.cachedProd++
		p.posted++
	}
}
