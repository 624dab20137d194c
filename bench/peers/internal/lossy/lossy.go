// Package lossy wraps a net.PacketConn so that it discards a fraction of
// the datagrams it receives: receiver-side loss for the library peers
// (KCP, QUIC) that own their sockets.
package lossy

import (
	"net"
	"sync"

	"github.com/walcast/walcast/bench/peers/internal/sock"
)

// Conn drops each received datagram with the generator's probability.
type Conn struct {
	net.PacketConn
	mu   sync.Mutex
	drop *sock.Drop
}

// Wrap returns pc dropping with probability p (seeded).
func Wrap(pc net.PacketConn, p float64, seed uint64) *Conn {
	return &Conn{PacketConn: pc, drop: sock.NewDrop(p, seed)}
}

// ReadFrom returns the next datagram that survives the drop.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, a, err := c.PacketConn.ReadFrom(b)
		if err != nil {
			return n, a, err
		}
		c.mu.Lock()
		hit := c.drop.Hit()
		c.mu.Unlock()
		if !hit {
			return n, a, nil
		}
	}
}

type buffered interface {
	SetReadBuffer(int) error
	SetWriteBuffer(int) error
}

// SetReadBuffer passes through to the wrapped socket (quic-go raises it).
func (c *Conn) SetReadBuffer(n int) error {
	if b, ok := c.PacketConn.(buffered); ok {
		return b.SetReadBuffer(n)
	}
	return nil
}

// SetWriteBuffer passes through to the wrapped socket.
func (c *Conn) SetWriteBuffer(n int) error {
	if b, ok := c.PacketConn.(buffered); ok {
		return b.SetWriteBuffer(n)
	}
	return nil
}
