package xdp

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// umemShare is what the sockets sharing one UMEM (XDP_SHARED_UMEM, one
// queue) share: the owner's fill and completion rings, and the TX frame
// stacks, which a completion may return to any socket. mu guards the
// rings and every member's txFree; each member's RX and TX rings stay its
// own.
type umemShare struct {
	mu      sync.Mutex
	owner   *Path
	members []*Path // by slot; nil: free (or closed)
	open    int     // sockets not yet closed, the owner included
}

func newShare(owner *Path) *umemShare {
	s := &umemShare{owner: owner, members: make([]*Path, 1+owner.cfg.Sharers), open: 1}
	s.members[0] = owner
	return s
}

// txFrames is the TX frame stack of slot: UMEM frames RxFrames+slot*TxFrames
// up to the next slot's, as addresses.
func txFrames(c *Config, slot int, frameLen uint64) []uint64 {
	free := make([]uint64, 0, c.TxFrames)
	base := c.RxFrames + slot*c.TxFrames
	for i := c.TxFrames - 1; i >= 0; i-- {
		free = append(free, uint64(base+i)*frameLen)
	}
	return free
}

// free returns a completed TX frame to the stack of the slot it belongs
// to (mu held). A frame of a slot that has closed is dropped.
func (s *umemShare) free(addr uint64) {
	c := &s.owner.cfg
	slot := (int(addr/s.owner.frameLen) - c.RxFrames) / c.TxFrames
	if slot >= 0 && slot < len(s.members) && s.members[slot] != nil {
		m := s.members[slot]
		m.txFree = append(m.txFree, addr)
	}
}

// leave closes member p. The owner's UMEM, fill and completion rings,
// socket and redirect program stay until the last member has left.
func (s *umemShare) leave(p *Path) error {
	var errs []error
	if r := s.owner.redirect; r != nil {
		errs = append(errs, r.UnregisterPort(p.cfg.Local.Port(), p.slot))
	}
	s.mu.Lock()
	s.members[p.slot] = nil
	s.open--
	last := s.open == 0
	s.mu.Unlock()
	if p.slot != 0 {
		errs = append(errs, p.release())
	}
	if last {
		errs = append(errs, s.owner.release())
	}
	return errors.Join(errs...)
}

// Share opens another AF_XDP socket on p's interface and queue that shares
// p's UMEM (XDP_SHARED_UMEM) and receives the IPv4/UDP datagrams sent to
// local's port (local's address may be zero: p's). peer is where its
// zero-address messages go. p must have been opened with Config.Sharers >
// 0 and have a free slot; like Open, Share must run in the interface's
// network namespace. The new Path has its own RX and TX rings and TX
// frames, may be used from its own goroutine, and inherits p's copy mode,
// ring sizes and busy polling; p's UMEM stays until every sharer and p are
// closed.
func (p *Path) Share(local, peer netip.AddrPort) (_ *Path, err error) {
	if p.closed {
		return nil, fmt.Errorf("xdp: share: %w", errClosedOwner)
	}
	if p.share == nil || p.slot != 0 {
		return nil, errors.New("xdp: share: the path was not opened with Config.Sharers > 0 (or is itself a sharer)")
	}
	if !local.Addr().IsValid() {
		local = netip.AddrPortFrom(p.cfg.Local.Addr(), local.Port())
	}
	cfg := p.cfg
	cfg.Local, cfg.Peer, cfg.PeerMAC, cfg.Sharers, cfg.Impair = local, peer, nil, 0, nil
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := p.share
	s.mu.Lock()
	slot := 0
	for i, m := range s.members {
		if m == nil && i > 0 {
			slot = i
			break
		}
		if m != nil && m.cfg.Local.Port() == local.Port() {
			s.mu.Unlock()
			return nil, fmt.Errorf("xdp: share: port %d is already served on this queue", local.Port())
		}
	}
	if slot == 0 {
		s.mu.Unlock()
		return nil, fmt.Errorf("xdp: share: all %d sharer slots are in use", len(s.members)-1)
	}
	q := &Path{cfg: cfg, fd: -1, ifindex: p.ifindex, frameLen: p.frameLen, umem: p.umem, fill: p.fill, comp: p.comp, rxPool: p.rxPool,
		share: s, slot: slot, mode: p.mode, zeroCopy: p.zeroCopy}
	q.txFree = txFrames(&cfg, slot, p.frameLen)
	s.members[slot] = q // reserved; freed below on error
	s.open++
	s.mu.Unlock()
	defer func() {
		if err != nil {
			q.closed = true
			s.leave(q)
		}
	}()
	q.hdr.srcMAC, q.hdr.src = p.hdr.srcMAC, local
	if peer.IsValid() {
		mac, err := resolve(peer.Addr())
		if err != nil {
			return nil, err
		}
		copy(q.peerMAC[:], mac)
		q.neigh.learn(peer.Addr(), q.peerMAC)
	}
	if err := q.setupShared(p.fd); err != nil {
		return nil, err
	}
	if err := p.redirect.RegisterPort(local.Port(), slot, q.fd); err != nil {
		return nil, err
	}
	return q, nil
}

var errClosedOwner = errors.New("the owner path is closed")

// setupShared builds a sharer's socket: its own RX and TX rings, bound
// with XDP_SHARED_UMEM to the owner's socket (which brings the UMEM and
// its fill and completion rings; no other bind flag is allowed then).
func (q *Path) setupShared(ownerFD int) error {
	c := &q.cfg
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("xdp: AF_XDP socket: %w", err)
	}
	q.fd = fd
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_RX_RING, c.RxFrames); err != nil {
		return fmt.Errorf("xdp: size rx ring to %d: %w", c.RxFrames, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_TX_RING, c.TxFrames); err != nil {
		return fmt.Errorf("xdp: size tx ring to %d: %w", c.TxFrames, err)
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("xdp: XDP_MMAP_OFFSETS: %w", err)
	}
	descSize := uint32(unsafe.Sizeof(unix.XDPDesc{}))
	var d unsafe.Pointer
	if q.rx.ring, d, err = mapRing(fd, &off.Rx, unix.XDP_PGOFF_RX_RING, uint32(c.RxFrames), descSize, "rx"); err != nil {
		return err
	}
	q.rx.descs = unsafe.Slice((*unix.XDPDesc)(d), c.RxFrames)
	if q.tx.ring, d, err = mapRing(fd, &off.Tx, unix.XDP_PGOFF_TX_RING, uint32(c.TxFrames), descSize, "tx"); err != nil {
		return err
	}
	q.tx.descs = unsafe.Slice((*unix.XDPDesc)(d), c.TxFrames)
	if err := q.sockOpts(); err != nil {
		return err
	}
	sa := &unix.SockaddrXDP{Flags: unix.XDP_SHARED_UMEM, Ifindex: uint32(q.ifindex), QueueID: uint32(c.Queue), SharedUmemFD: uint32(ownerFD)}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("xdp: bind %s queue %d sharing the UMEM of socket %d: %w", c.Interface, c.Queue, ownerFD, err)
	}
	return nil
}
