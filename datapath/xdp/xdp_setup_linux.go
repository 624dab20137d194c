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

	"golang.org/x/sys/unix"
)

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
