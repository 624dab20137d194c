// Package kcp is the KCP peer (github.com/xtaci/kcp-go/v5) in turbo mode:
// nodelay 1, interval 10 ms, fast resend 2, no congestion control,
// 1024-segment windows, message mode (the default), ACKs flushed at once, no write
// delay, MTU 1400, no FEC, no crypto. kcp-go runs its own goroutines, so
// Recv blocks on them (netpoll mode).
package kcp

import (
	"fmt"
	"net"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/lossy"
	kcpgo "github.com/xtaci/kcp-go/v5"
)

// Peer is KCP turbo over UDP loopback.
func Peer() peers.Peer {
	return peers.Peer{Name: "kcp-turbo", Mode: "netpoll", Reliable: true, Lossy: true, Open: open}
}

func turbo(s *kcpgo.UDPSession) {
	s.SetNoDelay(1, 10, 2, 1)
	s.SetWindowSize(1024, 1024)
	// Message mode is kcp-go's default (SetStreamMode is deprecated).
	s.SetACKNoDelay(true)
	s.SetWriteDelay(false)
	s.SetMtu(1400)
}

type conn struct{ s *kcpgo.UDPSession }

func (c conn) Send(p []byte) error {
	_, err := c.s.Write(p)
	return mapErr(err)
}

func (c conn) Recv(p []byte) (int, error) {
	n, err := c.s.Read(p)
	return n, mapErr(err)
}

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return peers.ErrTimeout
	}
	return fmt.Errorf("kcp: %v: %w", err, peers.ErrClosed)
}

type stats struct{ base uint64 }

// Retransmits counts KCP's retransmitted segments since the pair opened
// (kcp-go keeps only process-wide counters; one pair runs at a time).
func (s stats) Retransmits() int64 {
	return int64(kcpgo.DefaultSnmp.Copy().RetransSegs - s.base)
}

func open(cfg peers.Config) (*peers.Pair, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// lpc is B's socket (the listener), dpc A's (the dialer).
	lpc, err := cfg.ListenPacket(true)
	if err != nil {
		return nil, err
	}
	dpc, err := cfg.ListenPacket(false)
	if err != nil {
		lpc.Close()
		return nil, err
	}
	var lc, dc net.PacketConn = lpc, dpc
	if cfg.DropB > 0 {
		lc = lossy.Wrap(lpc, cfg.DropB, cfg.Seed*31+7)
	}
	if cfg.DropA > 0 {
		dc = lossy.Wrap(dpc, cfg.DropA, cfg.Seed)
	}
	ln, err := kcpgo.ServeConn(nil, 0, 0, lc)
	if err != nil {
		lpc.Close()
		dpc.Close()
		return nil, err
	}
	a, err := kcpgo.NewConn2(lpc.LocalAddr(), nil, 0, 0, dc)
	if err != nil {
		ln.Close()
		lpc.Close()
		dpc.Close()
		return nil, err
	}
	turbo(a)
	base := kcpgo.DefaultSnmp.Copy().RetransSegs
	hello := []byte("hello")
	if _, err := a.Write(hello); err != nil {
		return nil, err
	}
	b, err := ln.AcceptKCP()
	if err != nil {
		return nil, err
	}
	turbo(b)
	buf := make([]byte, cfg.MsgSize)
	if _, err := b.Read(buf); err != nil {
		return nil, err
	}
	return &peers.Pair{
		A: conn{a}, B: conn{b},
		Close: func() error {
			a.Close()
			b.Close()
			ln.Close()
			lpc.Close()
			return dpc.Close()
		},
		Stats: stats{base: base},
	}, nil
}
