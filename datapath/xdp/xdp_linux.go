package xdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/datapath"
	"golang.org/x/sys/unix"
)

// Path is one AF_XDP socket with its UMEM and rings. See the package doc.
type Path struct {
	cfg       Config
	fd        int
	ifindex   int
	umem      []byte
	fill      *addrRing // the owner's, when the UMEM is shared
	rxPool    *rxPool   // RX frames: posted to the kernel, or free (the owner's, when shared)
	comp      *addrRing
	rx        descRing
	tx        descRing
	txFree    []uint64   // UMEM addresses of TX frames not in flight (a stack)
	share     *umemShare // non-nil when the UMEM is (or may be) shared; see Share
	slot      int        // this socket's slot in share (0: the owner)
	hdr       header
	frameLen  uint64
	peerMAC   [6]byte
	neigh     neighbors
	redirect  *bpf.Redirect
	mode      bpf.Mode
	zeroCopy  bool
	zcErr     error // why zero-copy bind failed (CopyAuto fell back)
	busy      bool  // empty polls make a busy-poll recvfrom
	busyProbe bool  // read SO_INCOMING_NAPI_ID after the next frames
	txBudget  int   // descriptors one kick transmits at most
	kickMax   int   // kicks per Send while the kernel makes progress
	closed    bool
	stats     Stats
}

var _ datapath.Path = (*Path)(nil)

// Open creates the socket, UMEM and rings, binds queue cfg.Queue of
// cfg.Interface, and attaches the redirect program. It must be called in the
// interface's network namespace. The caller closes the Path.
func Open(cfg Config) (_ *Path, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("xdp: interface %q: %w", cfg.Interface, err)
	}
	if len(ifc.HardwareAddr) != 6 {
		return nil, fmt.Errorf("xdp: interface %q has no Ethernet address", cfg.Interface)
	}
	if err := checkQueues(cfg.Interface, cfg.Queue); err != nil {
		return nil, err
	}
	local := cfg.Local
	if !local.Addr().IsValid() {
		a, err := firstIPv4(ifc)
		if err != nil {
			return nil, err
		}
		local = netip.AddrPortFrom(a, local.Port())
	}
	p := &Path{cfg: cfg, fd: -1, ifindex: ifc.Index, frameLen: uint64(cfg.FrameSize)}
	p.cfg.Local = local
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	copy(p.hdr.srcMAC[:], ifc.HardwareAddr)
	p.hdr.src = local
	if cfg.Peer.IsValid() {
		mac := cfg.PeerMAC
		if mac == nil {
			if mac, err = resolve(cfg.Peer.Addr()); err != nil {
				return nil, err
			}
		}
		copy(p.peerMAC[:], mac)
		p.neigh.learn(cfg.Peer.Addr(), p.peerMAC)
	}
	if err := p.setup(); err != nil {
		return nil, err
	}
	rc := bpf.DefaultRedirectConfig()
	rc.Port, rc.Queues, rc.Impair = local.Port(), cfg.Queue+1, cfg.Impair
	if cfg.Sharers > 0 {
		rc.PortSlots = 1 + cfg.Sharers
	}
	if p.redirect, err = bpf.NewRedirect(rc); err != nil {
		return nil, err
	}
	if cfg.Sharers > 0 {
		p.share = newShare(p)
		err = p.redirect.RegisterPort(local.Port(), 0, p.fd)
	} else {
		err = p.redirect.Register(cfg.Queue, p.fd)
	}
	if err != nil {
		return nil, err
	}
	if p.mode, err = p.redirect.Attach(ifc.Index, cfg.XDPMode); err != nil {
		return nil, err
	}
	return p, nil
}

// Send implements [datapath.Path]. Completed TX frames are reclaimed first;
// then as many messages as there are free frames and TX slots are written and
// published with one release store, and the kernel is kicked if it asked for
// it. It returns n < v.Len() with a nil error when frames ran out (retry after
// the kernel completes some), and ErrNoNeighbor when message n's destination
// has no known MAC address.
func (p *Path) Send(v *batch.Vec) (int, error) {
	if p.closed {
		return 0, datapath.ErrClosed
	}
	if p.share != nil {
		p.share.mu.Lock()
	}
	p.reclaim()
	want := v.Len()
	room := min(len(p.txFree), int(p.tx.free(uint32(want))))
	var err error
	n := 0
	for ; n < want && n < room; n++ {
		b, to := v.Msg(n)
		if !to.IsValid() {
			to = p.cfg.Peer
		}
		mac := &p.peerMAC
		if to.Addr() != p.cfg.Peer.Addr() || !to.IsValid() {
			mac = p.neigh.lookup(to.Addr())
		}
		if mac == nil || !to.IsValid() {
			err = ErrNoNeighbor
			break
		}
		if len(b) > int(p.frameLen)-offPayload {
			err = errTooBig
			break
		}
		addr := p.txFree[len(p.txFree)-1]
		p.txFree = p.txFree[:len(p.txFree)-1]
		frame := p.umem[addr : addr+p.frameLen]
		copy(frame[offPayload:], b)
		l := p.hdr.put(frame, mac, to, len(b))
		p.tx.descs[p.tx.cachedProd&p.tx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(l)}
		p.tx.cachedProd++
	}
	if p.share != nil {
		p.share.mu.Unlock()
	}
	if n > 0 {
		p.tx.publish()
		p.stats.TxPackets += uint64(n)
	}
	if n < want && err == nil {
		p.stats.TxFull++
	}
	if n > 0 || p.tx.cachedProd != p.tx.cachedCons {
		p.kick()
	}
	return n, err
}

// bindRetry bounds the wait for a queue released by a just-closed socket.
const bindRetry = 2 * time.Second

var errTooBig = errors.New("xdp: payload larger than a UMEM frame")

// kick makes the kernel transmit what is on the TX ring. In copy mode the
// transmit runs inside sendto and stops after a budget of descriptors
// (TxBudget: the ring where the kernel allows, else 32) with EAGAIN, so it
// is repeated while the kernel makes progress.
func (p *Path) kick() {
	if p.cfg.NeedWakeup && !p.tx.needWakeup() {
		return
	}
	for range p.kickMax {
		p.stats.TxKicks++
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(p.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return
		case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
			// EAGAIN: the budget ran out with descriptors left; go on while
			// the kernel consumed something. EBUSY: the driver dropped the
			// frame (NET_XMIT_DROP) after the kernel took it off the ring;
			// it is completed, not sent, and the protocol's NAK recovers it.
			if e == unix.EAGAIN {
				p.stats.TxAgain++
			} else {
				p.stats.TxDropped++
			}
			before := p.tx.cachedCons
			p.tx.cachedCons = p.tx.ring.consLoad()
			if e != unix.EAGAIN || p.tx.cachedCons == before || p.tx.cachedCons == p.tx.cachedProd {
				return
			}
		default:
			return // ENETDOWN, ENXIO: the next Send tries again; Stats shows it
		}
	}
}

// reclaim moves completed TX frames back to the free stack (one acquire
// load of the completion producer, one release store of its consumer).
func (p *Path) reclaim() {
	n := p.comp.avail()
	if n == 0 {
		return
	}
	for range n {
		addr := p.comp.descs[p.comp.cachedCons&p.comp.mask]
		p.comp.cachedCons++
		if p.share != nil {
			p.share.free(addr) // the socket that sent it gets it back
			continue
		}
		p.txFree = append(p.txFree, addr)
	}
	p.comp.release()
}

// Recv implements [datapath.Path]: it takes up to v.Cap() descriptors from
// the RX ring, copies each valid payload into v with its source address,
// returns every frame to the fill ring, and publishes both rings once.
func (p *Path) Recv(v *batch.Vec) (int, error) {
	if p.closed {
		return 0, datapath.ErrClosed
	}
	v.Reset()
	avail := p.rx.avail()
	if avail == 0 {
		if p.busy || (p.cfg.NeedWakeup && p.fill.needWakeup()) {
			p.stats.RecvKicks++
			unix.Syscall6(unix.SYS_RECVFROM, uintptr(p.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		}
		return 0, nil
	}
	take := min(avail, uint32(v.Cap()))
	port := p.cfg.Local.Port()
	n := 0
	if p.share != nil {
		p.share.mu.Lock() // the fill ring is the owner's
	}
	for range take {
		d := p.rx.descs[p.rx.cachedCons&p.rx.mask]
		p.rx.cachedCons++
		frame := p.umem[d.Addr : d.Addr+uint64(d.Len)]
		if pk, ok := parse(frame, port); !ok {
			p.stats.RxInvalid++
		} else if buf := v.Buf(n); pk.n > len(buf) {
			p.stats.RxTooBig++
		} else {
			copy(buf, frame[pk.off:pk.off+pk.n])
			v.Set(n, pk.n, pk.src)
			p.neigh.learn(pk.src.Addr(), pk.srcMAC)
			n++
		}
		// In aligned mode the descriptor address points into its chunk
		// (past any headroom); the chunk's start is what the fill ring takes.
		p.rxPool.free = append(p.rxPool.free, d.Addr&^(p.frameLen-1))
	}
	p.rx.release()
	p.rxPool.posted -= int(take)
	p.rxPool.adapt(avail)
	p.rxPool.post(p.fill)
	p.fill.publish()
	if p.share != nil {
		p.share.mu.Unlock()
	}
	if p.cfg.NeedWakeup && p.fill.needWakeup() {
		p.stats.RecvKicks++
		unix.Syscall6(unix.SYS_RECVFROM, uintptr(p.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	}
	v.SetLen(n)
	p.stats.RxPackets += uint64(n)
	if p.busyProbe {
		p.probeBusy()
	}
	return n, nil
}

// probeBusy runs once, after the first received frames: busy polling
// starts only if the socket learned a NAPI context from them. Without one
// (and before any frame) the kernel never enters its busy-poll loop
// (sk_busy_loop needs a NAPI id), so an empty poll's recvfrom would be a
// system call that polls nothing.
func (p *Path) probeBusy() {
	p.busyProbe = false
	p.busy = p.cfg.BusyPollAlways || p.NAPIID() != 0
}

// LocalAddr implements [datapath.Path].
func (p *Path) LocalAddr() netip.AddrPort { return p.cfg.Local }

// Mode is how the redirect program is attached (native or generic).
func (p *Path) Mode() bpf.Mode { return p.mode }

// ZeroCopy reports whether the socket bound in zero-copy mode.
func (p *Path) ZeroCopy() bool { return p.zeroCopy }

// TxBudget is how many descriptors one TX kick may transmit: Config.TxBudget
// (or the TX ring) where the kernel took XDP_MAX_TX_SKB_BUDGET, else 32.
func (p *Path) TxBudget() int { return p.txBudget }

// ZeroCopyErr is the error the kernel gave for a zero-copy bind when
// Config.Copy was CopyAuto and the path fell back to copy mode (veth:
// EOPNOTSUPP); nil otherwise.
func (p *Path) ZeroCopyErr() error { return p.zcErr }

// NAPIID is the socket's SO_INCOMING_NAPI_ID: the NAPI context of the
// queue its frames came from, 0 before the first frame or where the device
// has none (generic XDP on veth), in which case busy polling does nothing.
func (p *Path) NAPIID() int {
	id, err := unix.GetsockoptInt(p.fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	if err != nil {
		return 0
	}
	return id
}

// FD is the AF_XDP socket (for poll(2) or diagnostics; owned by the Path).
func (p *Path) FD() int { return p.fd }

// Stats returns the counters, including the kernel's XDP_STATISTICS. Call
// it from the goroutine that uses the Path (or after that stopped); after
// Close the kernel fields are those read by Close.
func (p *Path) Stats() Stats {
	s := p.stats
	s.BusyPolling = p.busy
	if !p.closed {
		p.kernelStats(&s)
	}
	return s
}

// KernelStats returns only the Kernel* fields (one getsockopt), and may be
// called from any goroutine while the Path is open.
func (p *Path) KernelStats() Stats {
	var s Stats
	p.kernelStats(&s)
	return s
}

func (p *Path) kernelStats(s *Stats) {
	var ks unix.XDPStatistics
	if getsockopt(p.fd, unix.XDP_STATISTICS, unsafe.Pointer(&ks), unsafe.Sizeof(ks)) == nil {
		s.KernelRxDropped = ks.Rx_dropped
		s.KernelRxInvalidDescs = ks.Rx_invalid_descs
		s.KernelTxInvalidDescs = ks.Tx_invalid_descs
		s.KernelRxRingFull = ks.Rx_ring_full
		s.KernelRxFillRingEmpty = ks.Rx_fill_ring_empty_descs
		s.KernelTxRingEmptyDescs = ks.Tx_ring_empty_descs
	}
}

// Close implements [datapath.Path]: it detaches the program, closes the
// socket and unmaps the rings and the UMEM. A second Close does nothing.
func (p *Path) Close() error {
	if p.closed {
		return nil
	}
	p.kernelStats(&p.stats) // keep the kernel's last word
	p.closed = true
	if p.share != nil {
		return p.share.leave(p)
	}
	return p.release()
}
