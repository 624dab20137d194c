package mmsg

import (
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

// Path moves batches with sendmmsg/recvmmsg.
type Path struct {
	s      *sock.Socket
	tx     *batch.Tx
	rx     *batch.Rx
	feat   Features
	closed atomic.Bool

	wv     *batch.Vec
	wn     int
	werr   error
	waitFn func(fd uintptr) bool

	sent, recvd, sendCalls, recvCalls, eagain, enobufs, refused atomic.Uint64
}

var _ datapath.Path = (*Path)(nil)

// New opens the socket described by c and probes GSO and GRO.
func New(c Config) (*Path, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var f Features
	gro := false
	if c.GRO {
		if err := batch.ProbeGRO(); err != nil {
			f.GROReason = err.Error()
		} else {
			gro = true
		}
	} else {
		f.GROReason = "off in config"
	}
	s, err := sock.Open(sock.Config{Local: c.Local, Peer: c.Peer, SockBuf: c.SockBuf, BusyPollUS: c.BusyPollUS, GRO: gro})
	if err != nil {
		return nil, err
	}
	f.GRO = s.GRO
	if c.GSO {
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
	p.waitFn = func(uintptr) bool {
		p.wn, p.werr = p.Recv(p.wv)
		return p.wn > 0 || p.werr != nil
	}
	return p, nil
}

// Send transmits v's messages with sendmmsg (several calls when v holds
// more than Batch messages). A full socket buffer (EAGAIN/ENOBUFS) stops
// it early with a nil error; an unreachable peer (ICMP) loses the batch
// as the network would, counted in Stats.Refused.
func (p *Path) Send(v *batch.Vec) (int, error) {
	if p.closed.Load() {
		return 0, datapath.ErrClosed
	}
	total := v.Len()
	if total == 0 {
		return 0, nil
	}
	done := 0
	refusedOnce := false
	for done < total {
		p.sendCalls.Add(1)
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
			p.sent.Add(uint64(n))
			continue
		case unix.EAGAIN:
			p.eagain.Add(1)
			return done, nil
		case unix.ENOBUFS:
			p.enobufs.Add(1)
			return done, nil
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
			// A pending ICMP error is reported (and cleared) by the next
			// send; retry once, then treat the rest as lost on the wire.
			p.refused.Add(1)
			if !refusedOnce {
				refusedOnce = true
				continue
			}
			return total, nil
		}
		return done, &net.OpError{Op: "sendmmsg", Net: "udp", Addr: netAddr(p.s.Peer), Err: os.NewSyscallError("sendmmsg", e)}
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
	if p.closed.Load() {
		v.Reset()
		return 0, datapath.ErrClosed
	}
	p.recvCalls.Add(1)
	n, e := p.rx.Recv(v)
	switch e {
	case 0, unix.EAGAIN:
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
		p.refused.Add(1)
	default:
		return n, &net.OpError{Op: "recvmmsg", Net: "udp", Addr: netAddr(p.s.Local), Err: os.NewSyscallError("recvmmsg", e)}
	}
	if n > 0 {
		p.recvd.Add(uint64(n))
	}
	return n, nil
}

// RecvWait is Recv that parks the calling goroutine on Go's netpoller
// until at least one datagram is ready or the deadline passes (zero: no
// limit). It returns (0, nil) at the deadline and datapath.ErrClosed
// when the path is closed while it waits.
func (p *Path) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	if n, err := p.Recv(v); n > 0 || err != nil {
		return n, err
	}
	p.wv = v
	err := p.s.Wait(deadline, p.waitFn)
	p.wv = nil
	if ready, err := sock.WaitResult(err, p.closed.Load()); !ready {
		return 0, err
	}
	return p.wn, p.werr
}

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
func (p *Path) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	return p.s.Close()
}

// Stats returns the counters.
func (p *Path) Stats() Stats {
	return Stats{
		Sent: p.sent.Load(), Received: p.recvd.Load(), SendCalls: p.sendCalls.Load(), RecvCalls: p.recvCalls.Load(),
		EAGAIN: p.eagain.Load(), ENOBUFS: p.enobufs.Load(), Refused: p.refused.Load(),
		Truncated: p.rx.Truncated(), KernelDrops: p.rx.KernelDrops(),
		GSOSupers: p.tx.Supers(), GROSegments: p.rx.GROSegments(), GSOTurnedOff: p.tx.GSOTurnedOff(),
	}
}

func netAddr(a netip.AddrPort) net.Addr {
	if !a.IsValid() {
		return nil
	}
	return net.UDPAddrFromAddrPort(a)
}
