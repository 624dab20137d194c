package batch

import (
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// maxGSOSegments is the most segments one UDP_SEGMENT send may carry.
	// The kernel's UDP_MAX_SEGMENTS was 64 until 6.9 raised it to 128; 64
	// works on every kernel with GSO (4.18+).
	maxGSOSegments = 64
	// maxGSOBytes bounds one GSO super-datagram: the UDP length field and
	// the IPv4 total length are 16 bits, so stay below 65535 minus headers.
	maxGSOBytes = 65000
	// maxIov is the kernel's UIO_MAXIOV: iovecs per msghdr.
	maxIov = 1024
)

// TxConfig says how a [Tx] builds datagrams out of a [Vec].
type TxConfig struct {
	// Family is the socket's address family (unix.AF_INET or AF_INET6);
	// it decides how per-message addresses are encoded.
	Family int
	// GSO sends runs of equal-length messages to the same peer as one
	// UDP_SEGMENT super-datagram that the kernel splits. Turned off for
	// good the first time the kernel answers EIO.
	GSO bool
	// Coalesce, when > 0, packs consecutive messages to the same peer into
	// one datagram of at most Coalesce bytes (the frames' exact bytes,
	// back to back). 0 sends one message per datagram.
	Coalesce int
	// Peer is the socket's connected peer, if any: messages addressed to
	// it (or to the zero address) are sent without a destination, so the
	// kernel uses the connected route.
	Peer netip.AddrPort
}

// Tx sends the messages of a [Vec] with one sendmmsg call. Its mmsghdr,
// iovec, address and control arrays are built once in [NewTx]; Send
// points them at the Vec's slots and allocates nothing. A Tx is used by
// one goroutine.
type Tx struct {
	fd    int
	cfg   TxConfig
	gso   atomic.Bool
	hs    []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	ctrl  []byte
	ends  []int // ends[h]: Vec messages covered by headers 0..h

	gsoOff atomic.Uint64 // times GSO was turned off after EIO (0 or 1)
	supers atomic.Uint64 // GSO super-datagrams sent
}

var gsoCmsgSpace = unix.CmsgSpace(2)

// NewTx returns a Tx for fd that sends up to n messages per call.
func NewTx(fd, n int, cfg TxConfig) *Tx {
	if n <= 0 {
		n = 1
	}
	t := &Tx{
		fd:    fd,
		cfg:   cfg,
		hs:    make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n),
		ctrl:  make([]byte, n*gsoCmsgSpace),
		ends:  make([]int, n),
	}
	t.gso.Store(cfg.GSO)
	for h := range t.hs {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&t.ctrl[h*gsoCmsgSpace]))
		c.Level = unix.SOL_UDP
		c.Type = unix.UDP_SEGMENT
		c.SetLen(unix.CmsgLen(2))
	}
	return t
}

// GSO reports whether GSO is still in use.
func (t *Tx) GSO() bool { return t.gso.Load() }

// GSOTurnedOff reports whether the kernel refused GSO (EIO) and Tx fell
// back to plain datagrams.
func (t *Tx) GSOTurnedOff() bool { return t.gsoOff.Load() > 0 }

// Supers is the number of GSO super-datagrams sent.
func (t *Tx) Supers() uint64 { return t.supers.Load() }

// DisableGSO turns GSO off for good (tests, and hosts whose kernel
// mangles GSO; see [ProbeGSO]).
func (t *Tx) DisableGSO() { t.gso.Store(false) }

// Send hands messages 0..v.Len()-1 of v to the kernel in one sendmmsg and
// returns how many Vec messages went out, in order, with the raw errno of
// the call (0, EAGAIN, ENOBUFS, ...). When sendmmsg stops part way it
// returns the count that went out and errno 0; the failure is reported on
// the next call. v is not modified.
func (t *Tx) Send(v *Vec) (int, unix.Errno) { return t.SendRange(v, 0) }

// SendRange is Send for messages from..v.Len()-1; it returns how many of
// those went out.
func (t *Tx) SendRange(v *Vec, from int) (int, unix.Errno) {
	if v.Len() <= from {
		return 0, 0
	}
	for {
		nh, supers := t.build(v, from)
		r, e := Sys.Sendmmsg(t.fd, t.hs[:nh], 0)
		if e == 0 {
			if r <= 0 {
				return 0, 0
			}
			if supers > 0 {
				t.supers.Add(uint64(supers))
			}
			return t.ends[min(r, nh)-1] - from, 0
		}
		// UDP_SEGMENT: the kernel answers EIO when the egress device
		// cannot checksum segments (no TX checksum offload). Turn GSO
		// off for good and send the same messages as plain datagrams.
		if e == unix.EIO && t.gso.Load() {
			t.gso.Store(false)
			t.gsoOff.Add(1)
			continue
		}
		return 0, e
	}
}

// build fills the header array from v and returns the number of headers
// and how many of them carry a GSO cmsg. Messages that lie back to back
// in memory (views of one buffer, such as a sender's ring) share one
// iovec: the kernel pays per iovec, not per byte, when it copies in.
func (t *Tx) build(v *Vec, from int) (nh, supers int) {
	n := min(v.Len(), from+len(t.iovs))
	gso := t.gso.Load()
	limit := t.cfg.Coalesce
	i, k := from, 0 // next message, next iovec
	for i < n && nh < len(t.hs) {
		first, k0 := i, k
		p0, raw := v.Msg(i)
		addr := t.peer(raw)
		unit := len(p0)
		hdr := &t.hs[nh].Hdr
		hdr.Iov = &t.iovs[k]
		hdr.Flags = 0
		if addr.IsValid() {
			hdr.Name = (*byte)(unsafe.Pointer(&t.names[nh]))
			hdr.Namelen = PutSockaddr(&t.names[nh], t.cfg.Family, addr)
			if hdr.Namelen == 0 { // unreachable family: let the kernel say so
				hdr.Name = nil
			}
		} else {
			hdr.Name = nil
			hdr.Namelen = 0
		}
		k = t.addIov(k0, k, p0)
		i++
		switch {
		case gso && unit > 0:
			// Frames per segment: 1, or as many as fit the coalescing
			// limit. Every segment but the last has the same size, as
			// UDP_SEGMENT requires.
			per := 1
			if limit > unit {
				per = limit / unit
			}
			segSize := per * unit
			maxMsgs := min(maxGSOSegments*per, maxGSOBytes/unit, maxIov)
			for i < n && i-first < maxMsgs {
				p, a := v.Msg(i)
				if len(p) != unit || a != raw && t.peer(a) != addr {
					break
				}
				// A view right behind the last iovec (the next frame of a
				// sender's ring) extends it: addIov's common case, inline.
				if last := &t.iovs[k-1]; last.Base != nil && unsafe.Add(unsafe.Pointer(last.Base), last.Len) == unsafe.Pointer(&p[0]) {
					last.SetLen(int(last.Len) + unit)
				} else {
					k = t.addIov(k0, k, p)
				}
				i++
			}
			cnt := i - first
			if cnt > per {
				hdr.Control = &t.ctrl[nh*gsoCmsgSpace]
				hdr.SetControllen(gsoCmsgSpace)
				*(*uint16)(unsafe.Pointer(&t.ctrl[nh*gsoCmsgSpace+unix.CmsgLen(0)])) = uint16(segSize)
				supers++
			} else {
				hdr.Control = nil
				hdr.Controllen = 0
			}
		case limit > 0:
			total := unit
			for i < n && i-first < maxIov {
				p, a := v.Msg(i)
				if a != raw && t.peer(a) != addr || total+len(p) > limit {
					break
				}
				total += len(p)
				k = t.addIov(k0, k, p)
				i++
			}
			hdr.Control = nil
			hdr.Controllen = 0
		default:
			hdr.Control = nil
			hdr.Controllen = 0
		}
		hdr.SetIovlen(k - k0)
		t.ends[nh] = i
		nh++
	}
	return nh, supers
}

// addIov adds p to the iovecs k0..k−1 of one header: it extends the last
// one when p starts where that one ends, else it fills iovec k. It
// returns the next free iovec.
func (t *Tx) addIov(k0, k int, p []byte) int {
	if len(p) == 0 {
		if k == k0 {
			t.iovs[k] = unix.Iovec{}
			return k + 1
		}
		return k
	}
	if k > k0 {
		last := &t.iovs[k-1]
		if last.Base != nil && unsafe.Add(unsafe.Pointer(last.Base), last.Len) == unsafe.Pointer(&p[0]) {
			last.SetLen(int(last.Len) + len(p))
			return k
		}
	}
	t.iovs[k].Base = &p[0]
	t.iovs[k].SetLen(len(p))
	return k + 1
}

// peer is a as the kernel is told it: the zero address (the connected
// route) for the socket's connected peer.
func (t *Tx) peer(a netip.AddrPort) netip.AddrPort {
	if a == t.cfg.Peer {
		return netip.AddrPort{}
	}
	return a
}
