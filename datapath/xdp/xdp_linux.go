package xdp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
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

// setup builds the socket, UMEM and rings and binds (steps of
// Documentation/networking/af_xdp.rst, in the order the kernel needs).
func (p *Path) setup() error {
	c := &p.cfg
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("xdp: AF_XDP socket: %w", err)
	}
	p.fd = fd
	p.fill, p.comp = new(addrRing), new(addrRing)
	frames := c.RxFrames + (1+c.Sharers)*c.TxFrames // TX frames for the owner and every sharer
	// Anonymous private mapping: page-aligned and outside the Go heap. The
	// kernel pins it at XDP_UMEM_REG (charged to RLIMIT_MEMLOCK without
	// CAP_IPC_LOCK).
	p.umem, err = unix.Mmap(-1, 0, frames*c.FrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("xdp: mmap UMEM of %d bytes: %w", frames*c.FrameSize, err)
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p.umem)))),
		Len:  uint64(len(p.umem)),
		Size: uint32(c.FrameSize),
	}
	if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return fmt.Errorf("xdp: XDP_UMEM_REG: %w", err)
	}
	for _, o := range []struct {
		opt, n int
		name   string
	}{
		{unix.XDP_UMEM_FILL_RING, c.RxFrames, "fill"},
		{unix.XDP_UMEM_COMPLETION_RING, c.TxFrames, "completion"},
		{unix.XDP_RX_RING, c.RxFrames, "rx"},
		{unix.XDP_TX_RING, c.TxFrames, "tx"},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, o.n); err != nil {
			return fmt.Errorf("xdp: size %s ring to %d: %w", o.name, o.n, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("xdp: XDP_MMAP_OFFSETS: %w", err)
	}
	var d unsafe.Pointer
	rxN, txN := uint32(c.RxFrames), uint32(c.TxFrames)
	if p.fill.ring, d, err = mapRing(fd, &off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, rxN, 8, "fill"); err != nil {
		return err
	}
	p.fill.descs = unsafe.Slice((*uint64)(d), rxN)
	if p.comp.ring, d, err = mapRing(fd, &off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, txN, 8, "completion"); err != nil {
		return err
	}
	p.comp.descs = unsafe.Slice((*uint64)(d), txN)
	descSize := uint32(unsafe.Sizeof(unix.XDPDesc{}))
	if p.rx.ring, d, err = mapRing(fd, &off.Rx, unix.XDP_PGOFF_RX_RING, rxN, descSize, "rx"); err != nil {
		return err
	}
	p.rx.descs = unsafe.Slice((*unix.XDPDesc)(d), rxN)
	if p.tx.ring, d, err = mapRing(fd, &off.Tx, unix.XDP_PGOFF_TX_RING, txN, descSize, "tx"); err != nil {
		return err
	}
	p.tx.descs = unsafe.Slice((*unix.XDPDesc)(d), txN)

	// Frames [0, RxFrames) are for receiving: the first FillFrames go to
	// the fill ring before bind, so the first datagram already has a
	// buffer; [RxFrames, all) are the TX pool.
	p.rxPool = newRxPool(c, p.frameLen)
	p.rxPool.post(p.fill)
	p.fill.publish()
	p.txFree = txFrames(c, 0, p.frameLen)

	if err := p.sockOpts(); err != nil {
		return err
	}

	if err := p.bind(); err != nil {
		return err
	}
	var opts uint32
	if err := getsockopt(fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), unsafe.Sizeof(opts)); err == nil {
		p.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	return nil
}

// sockOpts sets the per-socket options: the TX budget per kick and busy
// polling.
func (p *Path) sockOpts() error {
	// One kick per Send where the kernel lets us raise its per-call budget
	// (6.17+); ENOPROTOOPT on older kernels, which transmit 32 per call.
	p.txBudget = 32
	want := p.cfg.TxBudget
	if want == 0 {
		want = p.cfg.TxFrames
	}
	if want > 32 {
		switch err := unix.SetsockoptInt(p.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, want); err {
		case nil:
			p.txBudget = want
		case unix.ENOPROTOOPT, unix.EINVAL:
		default:
			return fmt.Errorf("xdp: XDP_MAX_TX_SKB_BUDGET %d: %w", want, err)
		}
	}
	p.kickMax = p.cfg.TxFrames/p.txBudget + 2
	if p.cfg.BusyPoll > 0 {
		p.busyProbe = true // on after the first frames, with a NAPI id
		p.busy = p.cfg.BusyPollAlways
		if err := unix.SetsockoptInt(p.fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, p.cfg.BusyPoll); err != nil {
			return fmt.Errorf("xdp: SO_BUSY_POLL: %w", err)
		}
		// Preferring busy polling over softirq needs CAP_NET_ADMIN; without
		// it busy polling still runs, so EPERM is not an error.
		if err := unix.SetsockoptInt(p.fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1); err != nil && err != unix.EPERM {
			return fmt.Errorf("xdp: SO_PREFER_BUSY_POLL: %w", err)
		}
	}
	return nil
}

// bind binds the socket to its queue. A socket on the same queue that was
// just closed keeps the queue busy until the kernel's deferred release runs
// (EBUSY), so bind retries for up to bindRetry.
func (p *Path) bind() error {
	c := &p.cfg
	fd := p.fd
	var err error
	var flags uint16
	if c.NeedWakeup {
		flags |= unix.XDP_USE_NEED_WAKEUP
	}
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(p.ifindex), QueueID: uint32(c.Queue)}
	bind := func() error {
		deadline := time.Now().Add(bindRetry)
		for {
			err := unix.Bind(fd, sa)
			if err != unix.EBUSY || time.Now().After(deadline) {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	switch c.Copy {
	case CopyForce:
		sa.Flags |= unix.XDP_COPY
		err = bind()
	case ZeroCopyForce:
		sa.Flags |= unix.XDP_ZEROCOPY
		err = bind()
	default:
		sa.Flags = flags | unix.XDP_ZEROCOPY
		if err = bind(); err != nil {
			// veth and drivers without XSK support refuse zero-copy
			// (EOPNOTSUPP); copy mode works on every device.
			p.zcErr = err
			sa.Flags = flags | unix.XDP_COPY
			err = bind()
		}
	}
	if err != nil {
		return fmt.Errorf("xdp: bind %s queue %d (flags %#x): %w", c.Interface, c.Queue, sa.Flags, err)
	}
	return nil
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

// release frees what the path owns: the redirect program, the rings, the
// socket and, for the UMEM's owner, the UMEM.
func (p *Path) release() error {
	var errs []error
	if p.redirect != nil {
		errs = append(errs, p.redirect.Close())
		p.redirect = nil
	}
	rings := []*ring{&p.rx.ring, &p.tx.ring}
	if p.slot == 0 && p.fill != nil {
		rings = append(rings, &p.fill.ring, &p.comp.ring)
	}
	for _, r := range rings {
		errs = append(errs, r.unmap())
	}
	if p.fd >= 0 {
		errs = append(errs, unix.Close(p.fd))
		p.fd = -1
	}
	if p.umem != nil && p.slot == 0 {
		errs = append(errs, unix.Munmap(p.umem))
	}
	p.umem = nil
	return errors.Join(errs...)
}

func setsockopt(fd, opt int, v unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(v), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockopt(fd, opt int, v unsafe.Pointer, n uintptr) error {
	l := uint32(n)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(v), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// checkQueues refuses a device with more RX queues than the one socket we
// bind: the driver hashes flows over its queues, and datagrams that land on
// another queue would bypass the socket.
func checkQueues(ifname string, queue int) error {
	rx, err := rxQueues(ifname)
	if err != nil {
		return nil // no ETHTOOL_GCHANNELS: assume one queue, as before multi-queue NICs
	}
	if queue >= rx {
		return fmt.Errorf("xdp: %s has %d RX queues, queue %d does not exist", ifname, rx, queue)
	}
	if rx > 1 {
		return fmt.Errorf("%w: %s has %d RX queues and this path binds one socket to queue %d; "+
			"reduce them (ethtool -L %s combined 1, or create the veth with numrxqueues 1)",
			ErrMultiQueue, ifname, rx, queue, ifname)
	}
	return nil
}

// rxQueues asks the driver for its RX queue count (ETHTOOL_GCHANNELS):
// the larger of rx_count and combined_count.
func rxQueues(ifname string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var ch struct {
		cmd                                         uint32
		maxRx, maxTx, maxOther, maxCombined         uint32
		rxCount, txCount, otherCount, combinedCount uint32
	}
	ch.cmd = unix.ETHTOOL_GCHANNELS
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte // the rest of the ifreq union
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&ch)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 0, e
	}
	return int(max(ch.rxCount, ch.combinedCount)), nil
}

func firstIPv4(ifc *net.Interface) (netip.Addr, error) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("xdp: addresses of %s: %w", ifc.Name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && n.IP.To4() != nil {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("xdp: %s has no IPv4 address; set Config.Local", ifc.Name)
}

// resolve finds ip's MAC in this thread's network namespace's neighbour
// table, priming it with one datagram to the discard port if needed.
func resolve(ip netip.Addr) (net.HardwareAddr, error) {
	if mac, ok := arpLookup(ip); ok {
		return mac, nil
	}
	// A kernel socket makes the kernel resolve the address (ARP); our
	// redirect program is not attached yet, and passes ARP anyway.
	if c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 9))); err == nil {
		c.Write([]byte{0})
		c.Close()
	}
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		if mac, ok := arpLookup(ip); ok {
			return mac, nil
		}
	}
	return nil, fmt.Errorf("%w: %v is not in the neighbour table after 1 s; set Config.PeerMAC", ErrNoNeighbor, ip)
}

// arpLookup reads /proc/thread-self/net/arp: /proc/net would show the
// namespace of the process's main thread, not of this (locked) thread.
func arpLookup(ip netip.Addr) (net.HardwareAddr, bool) {
	f, err := os.Open("/proc/thread-self/net/arp")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	want := []byte(ip.String())
	for s.Scan() {
		fs := bytes.Fields(s.Bytes())
		// IP address, HW type, Flags, HW address, Mask, Device
		if len(fs) >= 4 && bytes.Equal(fs[0], want) {
			if mac, err := net.ParseMAC(string(fs[3])); err == nil && len(mac) == 6 && !bytes.Equal(mac, make([]byte, 6)) {
				return mac, true
			}
		}
	}
	return nil, false
}
