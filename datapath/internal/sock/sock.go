package sock

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"

	"github.com/walcast/walcast/datapath"
)

// Config says how to open a socket.
type Config struct {
	Local      netip.AddrPort // bind address; port 0 picks one
	Peer       netip.AddrPort // when valid, the socket is connected to it
	SockBuf    int            // SO_RCVBUF and SO_SNDBUF, bytes
	BusyPollUS int            // SO_BUSY_POLL, µs (0 = leave off)
	GRO        bool           // enable UDP_GRO
	// Multicast sets the group options (SO_REUSEADDR before bind, the
	// sending interface, TTL, loop, joins after bind); zero: none.
	Multicast datapath.Multicast
}

// WaitResult maps the error of a netpoller wait to the RecvWait contract
// shared by the udp and mmsg paths: ready means the wait callback ran and
// its result stands; otherwise err is what RecvWait returns with no
// datagram — nil at the deadline, datapath.ErrClosed when the path was
// closed (closed, or the fd reported closed) during the wait.
func WaitResult(err error, closed bool) (ready bool, out error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case closed, errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrClosed):
		return false, datapath.ErrClosed
	}
	return false, err
}

// Counters are the counts both socket paths keep, each updated by the
// path's goroutine and safe to read from any other.
type Counters struct {
	Sent      atomic.Uint64 // datagrams (Vec messages) handed to the kernel
	Received  atomic.Uint64 // datagrams received
	SendCalls atomic.Uint64 // send system calls
	RecvCalls atomic.Uint64 // receive system calls, including empty polls
	EAGAIN    atomic.Uint64 // sends refused with EAGAIN (socket buffer full)
	ENOBUFS   atomic.Uint64 // sends refused with ENOBUFS
	Refused   atomic.Uint64 // ECONNREFUSED/EHOSTUNREACH/ENETUNREACH seen (peer gone)
}

// NetAddr is a as a net.Addr, or fallback when a is invalid, or nil when
// both are: the Addr of a *net.OpError.
func NetAddr(a, fallback netip.AddrPort) net.Addr {
	if !a.IsValid() {
		a = fallback
	}
	if !a.IsValid() {
		return nil
	}
	return net.UDPAddrFromAddrPort(a)
}
