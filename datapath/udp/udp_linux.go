package udp

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/internal/sock"
	"golang.org/x/sys/unix"
)

// Path sends and receives one datagram per system call.
type Path struct {
	s     *sock.Socket
	peer  netip.AddrPort
	name  unix.RawSockaddrInet6 // scratch for sendto/recvfrom addresses
	salen uint32                // in/out length for recvfrom (a field: a local would escape through the seam)
	n     sock.Counters
	trunc atomic.Uint64
	// single: the last Recv that drained to EAGAIN had found at most one
	// datagram (light traffic), so the next returns right after its first
	// datagram instead of paying one more recvfrom to learn that nothing
	// follows (a syscall's worth of every round trip). It reads until EAGAIN
	// again the call after, so a burst is still drained in batches.
	single bool
}

var _ datapath.Path = (*Path)(nil)

// New opens the socket described by c.
func New(c Config) (*Path, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s, err := sock.Open(c.sock())
	if err != nil {
		return nil, err
	}
	p := &Path{s: s, peer: s.Peer}
	s.BindRecv(p.Recv)
	return p, nil
}

// Send transmits v's messages with one sendto each. A full socket buffer
// (EAGAIN/ENOBUFS) stops it early with a nil error. A peer known to be
// unreachable (ICMP: ECONNREFUSED and friends) loses the datagram, as
// the network would, and is counted in Stats.Refused.
func (p *Path) Send(v *batch.Vec) (int, error) {
	if p.s.Closed() {
		return 0, datapath.ErrClosed
	}
	fd := p.s.FD
	n := v.Len()
	i := 0
	for ; i < n; i++ {
		m, addr := v.Msg(i)
		var e unix.Errno
		p.n.SendCalls.Add(1)
		if addr.IsValid() && addr != p.peer {
			salen := batch.PutSockaddr(&p.name, p.s.Family, addr)
			if salen == 0 {
				return i, &net.OpError{Op: "sendto", Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: errors.New("address family differs from the socket's")}
			}
			_, e = batch.Sys.Sendto(fd, m, 0, &p.name, salen)
		} else {
			_, e = batch.Sys.Sendto(fd, m, 0, nil, 0)
		}
		switch e {
		case 0:
			p.n.Sent.Add(1)
			continue
		case unix.EAGAIN:
			p.n.EAGAIN.Add(1)
			return i, nil
		case unix.ENOBUFS:
			p.n.ENOBUFS.Add(1)
			return i, nil
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
			p.n.Refused.Add(1)
			continue
		}
		return i, &net.OpError{Op: "sendto", Net: "udp", Addr: sock.NetAddr(addr, p.peer), Err: os.NewSyscallError("sendto", e)}
	}
	return i, nil
}

// Recv fills v with the datagrams that are ready, one recvfrom each,
// without blocking.
func (p *Path) Recv(v *batch.Vec) (int, error) {
	v.Reset()
	if p.s.Closed() {
		return 0, datapath.ErrClosed
	}
	fd := p.s.FD
	connected := p.peer.IsValid()
	for !v.Full() {
		b := v.Buf(v.Len())
		var n int
		var e unix.Errno
		p.n.RecvCalls.Add(1)
		addr := p.peer
		if connected {
			n, e = batch.Sys.Recvfrom(fd, b, unix.MSG_TRUNC, nil, nil)
		} else {
			p.salen = unix.SizeofSockaddrInet6
			n, e = batch.Sys.Recvfrom(fd, b, unix.MSG_TRUNC, &p.name, &p.salen)
			addr = batch.ParseSockaddr(&p.name)
		}
		switch e {
		case 0:
		case unix.EAGAIN:
			p.single = v.Len() <= 1
			return v.Len(), nil
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
			p.n.Refused.Add(1) // a pending ICMP error; the next call reads data again
			continue
		default:
			return v.Len(), &net.OpError{Op: "recvfrom", Net: "udp", Addr: sock.NetAddr(p.s.Local, netip.AddrPort{}), Err: os.NewSyscallError("recvfrom", e)}
		}
		if n > len(b) { // MSG_TRUNC returns the datagram's real length
			p.trunc.Add(1)
			continue
		}
		v.Commit(n, addr)
		p.n.Received.Add(1)
		if p.single {
			p.single = false
			break
		}
	}
	return v.Len(), nil
}

// RecvWait is Recv that parks the calling goroutine on Go's netpoller
// until at least one datagram is ready or the deadline passes (zero
// deadline: no limit). It returns (0, nil) at the deadline and
// datapath.ErrClosed when the path is closed while it waits. It is the
// receive call for the park idle strategy, on hosts without a spare core.
func (p *Path) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	return p.s.RecvWait(v, deadline)
}

// ReleaseWait takes the socket out of Go's netpoller, where RecvWait put
// it: a loop that will only spin on Recv calls it, else every datagram
// wakes an idle runtime thread (a later RecvWait registers it again).
func (p *Path) ReleaseWait() { p.s.ReleaseWait() }

// LocalAddr is the bound address.
func (p *Path) LocalAddr() netip.AddrPort { return p.s.Local }

// Peer is the connected peer (zero when unconnected).
func (p *Path) Peer() netip.AddrPort { return p.peer }

// NAPIID reports the NAPI id of the last packet's device queue (0 on
// loopback: busy polling does nothing there).
func (p *Path) NAPIID() int { return p.s.NAPIID() }

// BusyPoll is the SO_BUSY_POLL value in effect, µs.
func (p *Path) BusyPoll() int { return p.s.BusyPoll }

// Close closes the socket; later calls return datapath.ErrClosed.
func (p *Path) Close() error { return p.s.Close() }

// Stats returns the counters.
func (p *Path) Stats() Stats {
	return Stats{
		Sent: p.n.Sent.Load(), Received: p.n.Received.Load(), SendCalls: p.n.SendCalls.Load(), RecvCalls: p.n.RecvCalls.Load(),
		EAGAIN: p.n.EAGAIN.Load(), ENOBUFS: p.n.ENOBUFS.Load(), Refused: p.n.Refused.Load(), Truncated: p.trunc.Load(),
	}
}
