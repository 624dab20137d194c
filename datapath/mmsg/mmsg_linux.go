package mmsg

import (
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/internal/sock"
	"golang.org/x/sys/unix"
)

// Path moves batches with sendmmsg/recvmmsg.
type Path struct {
	s    *sock.Socket
	tx   *batch.Tx
	rx   *batch.Rx
	feat Features
	n    sock.Counters
}

var _ datapath.Path = (*Path)(nil)

// New opens the socket described by c and probes GSO and GRO.
func New(c Config) (*Path, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	var f Features
	gro := false
	if !c.NoGRO {
		if err := batch.ProbeGRO(); err != nil {
			f.GROReason = err.Error()
		} else {
			gro = true
		}
	} else {
		f.GROReason = "off in config"
	}
	s, err := sock.Open(c.sock(gro))
	if err != nil {
		return nil, err
	}
	f.GRO = s.GRO
	if !c.NoGSO {
		if err := batch.ProbeGSO(); err != nil {
			f.GSOReason = err.Error()
		} else {
			f.GSO = true
		}
	} else {
		f.GSOReason = "off in config"
	}
	f.Coalesce = c.Coalesce
	f.BusyPoll = s.BusyPoll
	tc := batch.TxConfig{Family: s.Family, GSO: f.GSO, Peer: s.Peer}
	if c.Coalesce {
		tc.Coalesce = c.MaxDatagram
	}
	p := &Path{
		s:    s,
		tx:   batch.NewTx(s.FD, c.Batch, tc),
		rx:   batch.NewRx(s.FD, c.Batch, batch.RxConfig{GRO: f.GRO, Slots: c.GROSlots}),
		feat: f,
	}
	s.BindRecv(p.Recv)
	return p, nil
}

// Send transmits v's messages with sendmmsg (several calls when v holds
// more than Batch messages). A full socket buffer (EAGAIN/ENOBUFS) stops
// it early with a nil error; an unreachable peer (ICMP) loses the batch
// as the network would, counted in Stats.Refused.
func (p *Path) Send(v *batch.Vec) (int, error) {
	if p.s.Closed() {
		return 0, datapath.ErrClosed
	}
	total := v.Len()
	if total == 0 {
		return 0, nil
	}
	done := 0
	refusedOnce := false
	for done < total {
		p.n.SendCalls.Add(1)
		var n int
		var e unix.Errno
		if done == 0 {
			n, e = p.tx.Send(v)
		} else {
			n, e = p.sendFrom(v, done)
		}
		switch e {
		case 0:
			if n == 0 {
				return done, nil
			}
			done += n
			p.n.Sent.Add(uint64(n))
			continue
		case unix.EAGAIN:
			p.n.EAGAIN.Add(1)
			return done, nil
		case unix.ENOBUFS:
			p.n.ENOBUFS.Add(1)
			return done, nil
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
			// A pending ICMP error is reported (and cleared) by the next
			// send; retry once, then treat the rest as lost on the wire.
			p.n.Refused.Add(1)
			if !refusedOnce {
				refusedOnce = true
				continue
			}
			return total, nil
		}
		return done, &net.OpError{Op: "sendmmsg", Net: "udp", Addr: sock.NetAddr(p.s.Peer, netip.AddrPort{}), Err: os.NewSyscallError("sendmmsg", e)}
	}
	return done, nil
}

// sendFrom sends messages from..v.Len()-1. The Tx reads a Vec from index
// 0, so this path (hit only when v holds more than Batch messages) views
// the tail through a window Vec built once.
func (p *Path) sendFrom(v *batch.Vec, from int) (int, unix.Errno) {
	return p.tx.SendRange(v, from)
}

// Recv fills v with the datagrams that are ready (one recvmmsg, plus GRO
// segments left over from the last call) without blocking.
func (p *Path) Recv(v *batch.Vec) (int, error) {
	if p.s.Closed() {
		v.Reset()
		return 0, datapath.ErrClosed
	}
	p.n.RecvCalls.Add(1)
	n, e := p.rx.Recv(v)
	switch e {
	case 0, unix.EAGAIN:
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
		p.n.Refused.Add(1)
	default:
		return n, &net.OpError{Op: "recvmmsg", Net: "udp", Addr: sock.NetAddr(p.s.Local, netip.AddrPort{}), Err: os.NewSyscallError("recvmmsg", e)}
	}
	if n > 0 {
		p.n.Received.Add(uint64(n))
	}
	return n, nil
}

// RecvWait is Recv that parks the calling goroutine on Go's netpoller
// until at least one datagram is ready or the deadline passes (zero: no
// limit). It returns (0, nil) at the deadline and datapath.ErrClosed
// when the path is closed while it waits.
func (p *Path) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	return p.s.RecvWait(v, deadline)
}

// ReleaseWait takes the socket out of Go's netpoller, where RecvWait put
// it: a loop that will only spin on Recv calls it, else every datagram
// wakes an idle runtime thread (a later RecvWait registers it again).
func (p *Path) ReleaseWait() { p.s.ReleaseWait() }

// LocalAddr is the bound address.
func (p *Path) LocalAddr() netip.AddrPort { return p.s.Local }

// Features reports the offloads in use.
func (p *Path) Features() Features {
	f := p.feat
	if f.GSO && !p.tx.GSO() {
		f.GSO = false
		f.GSOReason = "turned off after EIO"
	}
	return f
}

// DisableGSO turns GSO off for good (tests and benchmarks of the plain
// sendmmsg path). Call it before the loop starts.
func (p *Path) DisableGSO() {
	p.tx.DisableGSO()
	p.feat.GSO = false
	p.feat.GSOReason = "disabled"
}

// NAPIID reports the NAPI id of the last packet's device queue.
func (p *Path) NAPIID() int { return p.s.NAPIID() }

// Close closes the socket; later calls return datapath.ErrClosed.
func (p *Path) Close() error { return p.s.Close() }

// Stats returns the counters.
func (p *Path) Stats() Stats {
	return Stats{
		Sent: p.n.Sent.Load(), Received: p.n.Received.Load(), SendCalls: p.n.SendCalls.Load(), RecvCalls: p.n.RecvCalls.Load(),
		EAGAIN: p.n.EAGAIN.Load(), ENOBUFS: p.n.ENOBUFS.Load(), Refused: p.n.Refused.Load(),
		Truncated: p.rx.Truncated(), KernelDrops: p.rx.KernelDrops(),
		GSOSupers: p.tx.Supers(), GROSegments: p.rx.GROSegments(), GSOTurnedOff: p.tx.GSOTurnedOff(),
	}
}
