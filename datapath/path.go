package datapath

import (
	"errors"
	"net/netip"

	"github.com/walcast/walcast/batch"
)

// Path moves datagrams between this host and its peer(s). All methods are
// called from one goroutine (the loop's pinned thread) except Close, which
// may be called from any goroutine once the loop has stopped using the
// Path. Implementations allocate nothing in Send and Recv.
type Path interface {
	// Send transmits messages 0..v.Len()-1 of v, each to its address (a
	// zero address means the connected peer). It returns how many were
	// handed to the network, in order. n < v.Len() with a nil error means
	// the path is momentarily full (EAGAIN/ENOBUFS); the caller retries
	// the rest. The Vec is not modified.
	Send(v *batch.Vec) (n int, err error)

	// Recv fills v (after resetting it) with up to v.Cap() received
	// datagrams without blocking and returns how many. 0 with a nil error
	// means nothing was ready.
	Recv(v *batch.Vec) (n int, err error)

	// LocalAddr is the address the path receives on.
	LocalAddr() netip.AddrPort

	// Close releases the path's resources. It must not be called while
	// Send or Recv is running.
	Close() error
}

// ErrClosed is returned by Send and Recv after Close.
var ErrClosed = errors.New("datapath: path closed")

// ReleaseWait takes p's socket out of Go's netpoller when p can say so
// (datapath/udp and datapath/mmsg can, and the wrappers that forward
// RecvWait forward this too): a loop about to spin on Recv calls it. A
// socket a park wait registered stays registered (Go has no other way to
// unregister it), and every datagram that arrives then wakes an idle
// runtime thread to report a readiness nobody waits for: a fraction of a
// CPU at 100 k datagrams/s, taken from the threads that need it. A later
// park wait registers the socket again.
func ReleaseWait(p Path) {
	if r, ok := p.(interface{ ReleaseWait() }); ok {
		r.ReleaseWait()
	}
}
