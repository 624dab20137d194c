// Package rawudp is the floor every protocol is compared with: plain UDP
// datagrams on non-blocking sockets, one write and one read per message,
// busy-polled. MmsgPeer and GSOPeer are the batched floors for the
// throughput workload (sendmmsg/recvmmsg, and UDP_SEGMENT/UDP_GRO).
// There is no framing and no reliability: what arrives is delivered.
package rawudp

import (
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/sock"
)

// Peer is raw UDP, one syscall per message.
func Peer() peers.Peer {
	return peers.Peer{Name: "raw-udp", Mode: "spin", Lossy: true, Open: open}
}

type conn struct{ u *sock.UDP }

func (c conn) Send(p []byte) error { return sock.PeerErr(c.u.Write(p)) }

func (c conn) Recv(p []byte) (int, error) {
	n, err := c.u.Read(p)
	return n, sock.PeerErr(err)
}

// Sockets opens two connected UDP sockets with cfg's drops and timeout.
func Sockets(cfg peers.Config) (a, b *sock.UDP, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	addrA, inA := cfg.Side(false)
	addrB, inB := cfg.Side(true)
	if a, err = sock.ListenUDPOn(inA, addrA.As4()); err != nil {
		return nil, nil, err
	}
	if b, err = sock.ListenUDPOn(inB, addrB.As4()); err != nil {
		a.Release()
		return nil, nil, err
	}
	if err = a.Connect(b.Addr()); err == nil {
		err = b.Connect(a.Addr())
	}
	if err != nil {
		a.Release()
		b.Release()
		return nil, nil, err
	}
	a.Timeout, b.Timeout = cfg.RecvTimeout(), cfg.RecvTimeout()
	a.Drop = sock.NewDrop(cfg.DropA, cfg.Seed)
	b.Drop = sock.NewDrop(cfg.DropB, cfg.Seed*31+7)
	return a, b, nil
}

// PairOf wraps two sockets as a peers.Pair with the usual Close/Release.
func PairOf(a, b *sock.UDP, ca, cb peers.Conn) *peers.Pair {
	return &peers.Pair{
		A: ca, B: cb,
		Close:   func() error { a.Close(); b.Close(); return nil },
		Release: func() { a.Release(); b.Release() },
	}
}

func open(cfg peers.Config) (*peers.Pair, error) {
	a, b, err := Sockets(cfg)
	if err != nil {
		return nil, err
	}
	return PairOf(a, b, conn{a}, conn{b}), nil
}
