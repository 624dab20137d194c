// Package tcp is the TCP_NODELAY peer: each message is a 4-byte
// big-endian length followed by the payload, written with one write(2)
// on a non-blocking socket and read by spinning.
package tcp

import (
	"encoding/binary"
	"fmt"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/internal/sock"
)

// Peer is TCP with Nagle off.
func Peer() peers.Peer {
	return peers.Peer{Name: "tcp-nodelay", Mode: "spin", Reliable: true, TCP: true, Open: open}
}

type conn struct {
	s        *sock.Stream
	out, hdr []byte
}

func (c *conn) Send(p []byte) error {
	if len(p)+4 > len(c.out) {
		return fmt.Errorf("tcp: message of %d bytes over %d", len(p), len(c.out)-4)
	}
	binary.BigEndian.PutUint32(c.out, uint32(len(p)))
	copy(c.out[4:], p)
	return sock.PeerErr(c.s.WriteAll(c.out[:4+len(p)]))
}

func (c *conn) Recv(p []byte) (int, error) {
	if err := c.s.ReadFull(c.hdr); err != nil {
		return 0, sock.PeerErr(err)
	}
	n := int(binary.BigEndian.Uint32(c.hdr))
	if n > len(p) {
		return 0, fmt.Errorf("tcp: %d-byte message into %d: %w", n, len(p), peers.ErrCorrupt)
	}
	return n, sock.PeerErr(c.s.ReadFull(p[:n]))
}

func open(cfg peers.Config) (*peers.Pair, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	addrA, inA := cfg.Side(false)
	addrB, inB := cfg.Side(true)
	a, b, err := sock.TCPPairOn(inA, addrA.As4(), inB, addrB.As4())
	if err != nil {
		return nil, err
	}
	a.Timeout, b.Timeout = cfg.RecvTimeout(), cfg.RecvTimeout()
	return &peers.Pair{
		A:       &conn{s: a, out: make([]byte, cfg.MsgSize+4), hdr: make([]byte, 4)},
		B:       &conn{s: b, out: make([]byte, cfg.MsgSize+4), hdr: make([]byte, 4)},
		Close:   func() error { a.Close(); b.Close(); return nil },
		Release: func() { a.Release(); b.Release() },
	}, nil
}
