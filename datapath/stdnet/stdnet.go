package stdnet

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/internal/defaults"
)

// Config configures a [Path]. A zero field means its default.
type Config struct {
	// Local is the address [Listen] binds (default: the unspecified
	// address of Peer's family, IPv4 without a Peer, on a free port).
	Local netip.AddrPort
	// Peer, when valid, connects the socket: datagrams without an
	// address go there, and only its datagrams are received.
	Peer netip.AddrPort
	// Slots is the number of datagrams the receive queue holds between
	// the reader goroutine and Recv (default 1024).
	Slots int
	// SlotSize is the largest datagram received, bytes (default 65507,
	// the largest UDP payload); larger ones are dropped and counted.
	SlotSize int
}

// ErrConfig matches every configuration error of this package.
var ErrConfig = cfgerr.Sentinel("stdnet")

func (c Config) withDefaults() Config {
	c.Slots = defaults.Or(c.Slots, 1024)
	c.SlotSize = defaults.Or(c.SlotSize, 65507)
	return c
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Slots < 1 || c.Slots > 1<<20:
		return cfgerr.New("stdnet", ErrConfig, "Slots", "%d outside 1..%d", c.Slots, 1<<20)
	case c.SlotSize < 64 || c.SlotSize > 65535:
		return cfgerr.New("stdnet", ErrConfig, "SlotSize", "%d outside 64..65535", c.SlotSize)
	case c.Local.IsValid() && c.Peer.IsValid() && c.Local.Addr().Unmap().Is4() != c.Peer.Addr().Unmap().Is4():
		return cfgerr.New("stdnet", ErrConfig, "Peer", "%s and Local %s are of different address families", c.Peer, c.Local)
	}
	return nil
}

// Stats are the path's counters (safe to read from any goroutine).
type Stats struct {
	Sent      uint64 // datagrams written
	Received  uint64 // datagrams handed to Recv's caller
	Dropped   uint64 // datagrams read while the queue was full, dropped
	Truncated uint64 // datagrams larger than SlotSize, dropped
	Refused   uint64 // ECONNREFUSED/EHOSTUNREACH/ENETUNREACH seen (peer gone)
}

// Path is a datapath over a net.PacketConn.
type Path struct {
	pc    net.PacketConn
	uc    *net.UDPConn // pc, when it is one: allocation-free reads and writes
	peer  netip.AddrPort
	local netip.AddrPort

	_    [64]byte
	head atomic.Uint64 // next slot Recv takes; written by Recv
	_    [56]byte
	tail atomic.Uint64 // next slot the reader fills; written by the reader
	_    [56]byte

	mask    uint64
	bufs    [][]byte // SlotSize+1 bytes each: one more shows a datagram was larger
	lens    []int
	from    []netip.AddrPort
	scratch []byte // where the reader reads while the queue is full

	waiting atomic.Bool
	wake    chan struct{}
	done    chan struct{} // closed by Close
	rdone   chan struct{} // closed when the reader has returned
	readErr atomic.Pointer[error]
	closed  atomic.Bool
	timer   *time.Timer // RecvWait's deadline; owned by the receiving goroutine

	sent, recvd, dropped, trunc, refused atomic.Uint64
}

var _ datapath.Path = (*Path)(nil)

// Listen opens a UDP socket with net.ListenUDP (or net.DialUDP, connected,
// with a Peer) and returns a Path over it.
func Listen(c Config) (*Path, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	local := c.Local
	if !local.IsValid() {
		local = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		if c.Peer.IsValid() && c.Peer.Addr().Is6() && !c.Peer.Addr().Is4In6() {
			local = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
		}
	}
	var uc *net.UDPConn
	var err error
	if c.Peer.IsValid() {
		uc, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(local), net.UDPAddrFromAddrPort(c.Peer))
	} else {
		uc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(local))
	}
	if err != nil {
		return nil, err
	}
	p, err := New(uc, c)
	if err != nil {
		uc.Close()
	}
	return p, err
}

// New returns a Path over pc, which it owns from then on (Close closes
// it). c.Local is ignored; c.Peer, when valid, is where datagrams without
// an address go (pc must then not be connected elsewhere). A connected
// *net.UDPConn's peer is taken as Peer.
func New(pc net.PacketConn, c Config) (*Path, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	size := 1
	for size < c.Slots {
		size <<= 1
	}
	p := &Path{
		pc: pc, peer: c.Peer, mask: uint64(size - 1),
		bufs: make([][]byte, size), lens: make([]int, size), from: make([]netip.AddrPort, size),
		scratch: make([]byte, c.SlotSize+1),
		wake:    make(chan struct{}, 1), done: make(chan struct{}), rdone: make(chan struct{}),
		timer: time.NewTimer(time.Hour),
	}
	p.timer.Stop()
	for i := range p.bufs {
		p.bufs[i] = make([]byte, c.SlotSize+1)
	}
	p.uc, _ = pc.(*net.UDPConn)
	if p.uc != nil {
		if ra, ok := p.uc.RemoteAddr().(*net.UDPAddr); ok && ra != nil {
			p.peer = ra.AddrPort()
		}
	}
	if la, ok := pc.LocalAddr().(*net.UDPAddr); ok {
		p.local = la.AddrPort()
	} else if ap, err := netip.ParseAddrPort(pc.LocalAddr().String()); err == nil {
		p.local = ap
	}
	go p.read()
	return p, nil
}

// connected reports whether writes must go through Write (a dialled
// *net.UDPConn refuses WriteTo).
func (p *Path) connected() bool {
	return p.uc != nil && p.uc.RemoteAddr() != nil
}

// read is the reader goroutine: it blocks in ReadFrom and queues what
// arrives until the conn is closed or fails.
func (p *Path) read() {
	defer close(p.rdone)
	for {
		t := p.tail.Load()
		full := t-p.head.Load() > p.mask
		buf := p.scratch
		if !full {
			buf = p.bufs[t&p.mask]
		}
		n, from, err := p.readFrom(buf)
		if err != nil {
			if p.closed.Load() {
				return
			}
			if refused(err) {
				p.refused.Add(1) // a pending ICMP error; the next read returns data again
				continue
			}
			p.fail(err)
			return
		}
		switch {
		case n > len(buf)-1:
			p.trunc.Add(1)
		case full:
			p.dropped.Add(1)
		default:
			p.lens[t&p.mask], p.from[t&p.mask] = n, from
			p.tail.Store(t + 1) // publishes the slot
			p.signal()
		}
	}
}

func (p *Path) readFrom(b []byte) (int, netip.AddrPort, error) {
	if p.uc != nil {
		return p.uc.ReadFromUDPAddrPort(b)
	}
	n, a, err := p.pc.ReadFrom(b)
	var from netip.AddrPort
	if ua, ok := a.(*net.UDPAddr); ok {
		from = ua.AddrPort()
	} else if a != nil {
		from, _ = netip.ParseAddrPort(a.String())
	}
	return n, from, err
}

// signal wakes a RecvWait that is parked.
func (p *Path) signal() {
	if p.waiting.Load() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// Send writes v's messages, one write each (a zero address means Peer).
// A peer known to be unreachable (ICMP) loses the datagram, as the
// network would, and is counted in Stats.Refused.
func (p *Path) Send(v *batch.Vec) (int, error) {
	if p.closed.Load() {
		return 0, datapath.ErrClosed
	}
	conn := p.connected()
	n := v.Len()
	for i := 0; i < n; i++ {
		m, addr := v.Msg(i)
		var err error
		switch {
		case conn && (!addr.IsValid() || addr == p.peer):
			_, err = p.uc.Write(m)
		case conn:
			return i, &net.OpError{Op: "write", Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: errors.New("connected to another address")}
		case !addr.IsValid() && !p.peer.IsValid():
			return i, &net.OpError{Op: "write", Net: "udp", Err: errors.New("no address and no peer")}
		case p.uc != nil:
			if !addr.IsValid() {
				addr = p.peer
			}
			_, err = p.uc.WriteToUDPAddrPort(m, addr)
		default:
			if !addr.IsValid() {
				addr = p.peer
			}
			_, err = p.pc.WriteTo(m, net.UDPAddrFromAddrPort(addr))
		}
		switch {
		case err == nil:
			p.sent.Add(1)
		case refused(err):
			p.refused.Add(1)
		case errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN):
			return i, nil
		case errors.Is(err, net.ErrClosed):
			return i, datapath.ErrClosed
		default:
			return i, err
		}
	}
	return n, nil
}

// Recv fills v (after resetting it) with the queued datagrams, without
// blocking and without a system call.
func (p *Path) Recv(v *batch.Vec) (int, error) {
	v.Reset()
	if p.closed.Load() {
		return 0, datapath.ErrClosed
	}
	h, t := p.head.Load(), p.tail.Load()
	for ; h != t && !v.Full(); h++ {
		i := h & p.mask
		v.Append(p.bufs[i][:p.lens[i]], p.from[i])
	}
	p.head.Store(h) // frees the slots
	if k := v.Len(); k > 0 {
		p.recvd.Add(uint64(k))
		return k, nil
	}
	if e := p.readErr.Load(); e != nil {
		return 0, *e
	}
	return 0, nil
}

// RecvWait is Recv that waits until a datagram is queued or the deadline
// passes (zero: no limit). It returns (0, nil) at the deadline and
// datapath.ErrClosed when the path is closed while it waits.
func (p *Path) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	if n, err := p.Recv(v); n > 0 || err != nil {
		return n, err
	}
	p.waiting.Store(true)
	defer p.waiting.Store(false)
	if n, err := p.Recv(v); n > 0 || err != nil { // queued between the check and the flag
		return n, err
	}
	var tc <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return 0, nil
		}
		p.timer.Reset(d)
		defer p.timer.Stop()
		tc = p.timer.C
	}
	select {
	case <-p.wake:
		return p.Recv(v)
	case <-tc:
		return 0, nil
	case <-p.done:
		return 0, datapath.ErrClosed
	}
}

// LocalAddr is the bound address.
func (p *Path) LocalAddr() netip.AddrPort { return p.local }

// Peer is the connected or configured peer (zero when none).
func (p *Path) Peer() netip.AddrPort { return p.peer }

// Close closes the conn, waits for the reader goroutine and wakes a
// parked RecvWait; later calls return datapath.ErrClosed.
func (p *Path) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.done)
	err := p.pc.Close()
	<-p.rdone
	return err
}

// Stats returns the counters.
func (p *Path) Stats() Stats {
	return Stats{Sent: p.sent.Load(), Received: p.recvd.Load(), Dropped: p.dropped.Load(), Truncated: p.trunc.Load(), Refused: p.refused.Load()}
}

// fail keeps the error that stopped the reader for Recv to return (a
// function of its own: taking the address of read's err would move it to
// the heap on every read).
func (p *Path) fail(err error) {
	p.readErr.Store(&err)
	p.signal()
}
