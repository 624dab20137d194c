package batch

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GROSlot is the receive buffer size per message when UDP GRO is on. The
// kernel hands a coalesced run of datagrams to one recvmmsg slot and
// silently truncates it to the slot (MSG_TRUNC), so a slot must hold the
// largest possible UDP payload.
const GROSlot = 65535

// RxConfig says how an [Rx] receives.
type RxConfig struct {
	// GRO receives into private 64 KiB slots and splits coalesced
	// datagrams at the segment size the kernel reports in the UDP_GRO
	// cmsg. The socket must have UDP_GRO enabled.
	GRO bool
	// Slots is the number of private 64 KiB slots with GRO (default 16).
	Slots int
}

// Rx receives datagrams into a [Vec] with one recvmmsg call. Without GRO
// it receives straight into the Vec's slots; with GRO it receives into
// private 64 KiB slots and hands each segment to the Vec as a view of
// its slot (no copy), keeping segments that did not fit for the next
// call. Either way the messages are valid until the next Recv. Nothing
// allocates after [NewRx]. An Rx is used by one goroutine.
type Rx struct {
	fd    int
	gro   bool
	hs    []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	ctrl  []byte
	space int
	slab  []byte // GRO slots

	// Pending GRO segments: headers pendH..pendN-1, offset pendOff in pendH.
	pendH, pendN, pendOff int
	pendSeg               []int // segment size per header (0 = whole)

	truncated atomic.Uint64 // datagrams larger than their slot, dropped
	kdrops    atomic.Uint64 // kernel receive-queue drops (SO_RXQ_OVFL), cumulative
	segs      atomic.Uint64 // datagrams delivered from GRO super-datagrams
}

var rxCmsgSpace = unix.CmsgSpace(4) * 2 // UDP_GRO (int) + SO_RXQ_OVFL (u32)

// NewRx returns an Rx for fd that receives up to n datagrams per call
// (n is capped by the Vec passed to Recv).
func NewRx(fd, n int, cfg RxConfig) *Rx {
	if n <= 0 {
		n = 1
	}
	slots := n
	if cfg.GRO {
		slots = cfg.Slots
		if slots <= 0 {
			slots = 16
		}
		slots = min(slots, n)
	}
	r := &Rx{
		fd:      fd,
		gro:     cfg.GRO,
		hs:      make([]unix.Mmsghdr, slots),
		iovs:    make([]unix.Iovec, slots),
		names:   make([]unix.RawSockaddrInet6, slots),
		space:   rxCmsgSpace,
		ctrl:    make([]byte, slots*rxCmsgSpace),
		pendSeg: make([]int, slots),
	}
	if cfg.GRO {
		r.slab = make([]byte, slots*GROSlot)
		for i := range r.iovs {
			r.iovs[i].Base = &r.slab[i*GROSlot]
			r.iovs[i].SetLen(GROSlot)
		}
	}
	for i := range r.hs {
		r.hs[i].Hdr.Iov = &r.iovs[i]
		r.hs[i].Hdr.SetIovlen(1)
		r.hs[i].Hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		r.hs[i].Hdr.Control = &r.ctrl[i*r.space]
	}
	return r
}

// Truncated is the number of datagrams dropped because they were larger
// than the slot they arrived in.
func (r *Rx) Truncated() uint64 { return r.truncated.Load() }

// KernelDrops is the socket's receive-queue overflow counter as last
// reported by the kernel (SO_RXQ_OVFL; 0 if the option is off).
func (r *Rx) KernelDrops() uint64 { return r.kdrops.Load() }

// GROSegments is the number of datagrams split out of GRO super-datagrams.
func (r *Rx) GROSegments() uint64 { return r.segs.Load() }

// Pending reports whether GRO segments received earlier are waiting for
// room in a Vec.
func (r *Rx) Pending() bool { return r.pendH < r.pendN }

// Recv resets v and fills it with up to v.Cap() datagrams: the GRO
// segments left from the previous call if there are any (the private
// slots they are views of cannot take a recvmmsg while v refers to
// them), else one recvmmsg. It returns the number of messages in v and
// the raw errno of the call (EAGAIN means nothing more was ready). The
// messages are valid until the next Recv.
func (r *Rx) Recv(v *Vec) (int, unix.Errno) {
	v.Reset()
	if r.gro {
		return r.recvGRO(v)
	}
	n := min(v.Cap(), len(r.hs))
	for i := 0; i < n; i++ {
		b := v.Buf(i)
		r.iovs[i].Base = &b[0]
		r.iovs[i].SetLen(len(b))
		r.hs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		r.hs[i].Hdr.SetControllen(r.space)
		r.hs[i].Hdr.Flags = 0
	}
	got, e := Sys.Recvmmsg(r.fd, r.hs[:n], 0)
	if e != 0 {
		return 0, e
	}
	k := 0
	for i := 0; i < got; i++ {
		h := &r.hs[i]
		r.parseCmsgs(i)
		if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
			r.truncated.Add(1)
			continue
		}
		if k != i { // compact over a dropped message: swap slot contents in
			copy(v.Buf(k), v.Buf(i)[:h.Len])
		}
		v.Set(k, int(h.Len), ParseSockaddr(&r.names[i]))
		k++
	}
	v.SetLen(k)
	return k, 0
}

func (r *Rx) recvGRO(v *Vec) (int, unix.Errno) {
	if r.Pending() {
		if r.drain(v); v.Len() > 0 || r.Pending() {
			return v.Len(), 0
		}
	}
	for i := range r.hs {
		r.hs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		r.hs[i].Hdr.SetControllen(r.space)
		r.hs[i].Hdr.Flags = 0
	}
	got, e := Sys.Recvmmsg(r.fd, r.hs, 0)
	if e != 0 {
		return v.Len(), e
	}
	for i := 0; i < got; i++ {
		seg := r.parseCmsgs(i)
		if r.hs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
			r.truncated.Add(1)
			r.hs[i].Len = 0
		}
		r.pendSeg[i] = seg
	}
	r.pendH, r.pendN, r.pendOff = 0, got, 0
	r.drain(v)
	return v.Len(), 0
}

// drain hands pending GRO segments to v, as views of their slots, until
// v is full.
func (r *Rx) drain(v *Vec) {
	slot := v.SlotSize()
	var segs, trunc uint64
	for r.pendH < r.pendN && !v.Full() {
		h := r.pendH
		total := int(r.hs[h].Len)
		buf := r.slab[h*GROSlot : h*GROSlot+total]
		seg := r.pendSeg[h]
		if seg <= 0 || seg > total {
			seg = total
		}
		addr := ParseSockaddr(&r.names[h])
		off := r.pendOff
		for off < total && !v.Full() {
			end := min(off+seg, total)
			p := buf[off:end]
			off = end
			if len(p) > slot {
				trunc++
				continue
			}
			v.AppendView(p, addr)
			if seg < total {
				segs++
			}
		}
		r.pendOff = off
		if off >= total {
			r.pendH++
			r.pendOff = 0
		}
	}
	if segs > 0 {
		r.segs.Add(segs)
	}
	if trunc > 0 {
		r.truncated.Add(trunc)
	}
}

// parseCmsgs reads the control messages of header i: the GRO segment size
// (returned; 0 when absent) and the SO_RXQ_OVFL drop counter.
func (r *Rx) parseCmsgs(i int) int {
	h := &r.hs[i].Hdr
	n := int(h.Controllen)
	b := r.ctrl[i*r.space : i*r.space+min(n, r.space)]
	seg := 0
	for len(b) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		cl := int(c.Len)
		if cl < unix.SizeofCmsghdr || cl > len(b) {
			break
		}
		data := b[unix.CmsgLen(0):cl]
		switch {
		case c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO:
			// The kernel writes gso_size as an int (udp_cmsg_recv).
			if len(data) >= 4 {
				seg = int(*(*int32)(unsafe.Pointer(&data[0])))
			} else if len(data) >= 2 {
				seg = int(*(*uint16)(unsafe.Pointer(&data[0])))
			}
		case c.Level == unix.SOL_SOCKET && c.Type == unix.SO_RXQ_OVFL:
			if len(data) >= 4 {
				r.kdrops.Store(uint64(*(*uint32)(unsafe.Pointer(&data[0]))))
			}
		}
		adv := unix.CmsgSpace(cl - unix.CmsgLen(0))
		if adv > len(b) {
			break
		}
		b = b[adv:]
	}
	return seg
}
