// Package sock has the raw non-blocking sockets the spinning peers share:
// a UDP socket and a TCP stream whose reads busy-poll on EAGAIN, with an
// optional receiver-side drop, a deadline checked every few hundred
// spins and a close flag instead of closing an fd under a running call.
package sock

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/bench/peers"
	"golang.org/x/sys/unix"
)

// Errors compared by the peers (kept as unix.Errno: no allocation in the
// spin loop).
var (
	errTimeout = timeoutError{}
)

type timeoutError struct{}

func (timeoutError) Error() string { return "sock: timeout" }

// IsTimeout reports whether err is a receive deadline.
func IsTimeout(err error) bool { return err == errTimeout }

// ErrClosed is returned after Close.
var ErrClosed = closedError{}

type closedError struct{}

func (closedError) Error() string { return "sock: closed" }

// PeerErr turns this package's errors into the peers' sentinels
// (peers.ErrTimeout, peers.ErrClosed); any other error is returned as is.
func PeerErr(err error) error {
	switch {
	case err == nil:
		return nil
	case IsTimeout(err):
		return peers.ErrTimeout
	case errors.Is(err, ErrClosed):
		return peers.ErrClosed
	}
	return err
}

// Drop is a receiver-side loss generator (xorshift64*), deterministic for
// a seed. The zero probability never drops.
type Drop struct {
	p     float64
	state uint64
}

// NewDrop returns a generator dropping with probability p.
func NewDrop(p float64, seed uint64) *Drop {
	if seed == 0 {
		seed = 0x9e3779b97f4a7c15
	}
	return &Drop{p: p, state: seed}
}

// Hit reports whether this datagram is dropped.
func (d *Drop) Hit() bool {
	if d == nil || d.p <= 0 {
		return false
	}
	d.state ^= d.state >> 12
	d.state ^= d.state << 25
	d.state ^= d.state >> 27
	r := d.state * 2685821657736338717
	return float64(r>>11)/(1<<53) < d.p
}

// UDP is a non-blocking UDP socket bound on 127.0.0.1.
type UDP struct {
	FD      int
	closed  atomic.Bool
	Drop    *Drop
	Timeout time.Duration
	Dropped int64 // datagrams discarded by Drop
}

// ListenUDP binds a non-blocking UDP socket on 127.0.0.1:0 with 8 MiB
// buffers (forced where CAP_NET_ADMIN allows).
func ListenUDP() (*UDP, error) {
	return ListenUDPOn(func(f func() error) error { return f() }, [4]byte{127, 0, 0, 1})
}

// ListenUDPOn is ListenUDP bound to addr, the socket created by in (which
// runs it in a network namespace).
func ListenUDPOn(in func(func() error) error, addr [4]byte) (*UDP, error) {
	var fd int
	err := in(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	bufs(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &UDP{FD: fd, Timeout: 2 * time.Second}, nil
}

func bufs(fd int) {
	const size = 8 << 20
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, size)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, size)
	}
}

// Addr is the bound address.
func (u *UDP) Addr() *unix.SockaddrInet4 {
	sa, _ := unix.Getsockname(u.FD)
	a, _ := sa.(*unix.SockaddrInet4)
	return a
}

// Connect fixes the peer, so Write needs no address and Read sees only it.
func (u *UDP) Connect(to *unix.SockaddrInet4) error { return unix.Connect(u.FD, to) }

// Write sends one datagram to the connected peer, spinning on EAGAIN
// (full socket buffer).
func (u *UDP) Write(p []byte) error {
	for {
		if u.closed.Load() {
			return ErrClosed
		}
		_, err := unix.Write(u.FD, p)
		if err == nil {
			return nil
		}
		if err != unix.EAGAIN && err != unix.ENOBUFS {
			return err
		}
	}
}

// WriteTo sends one datagram to a.
func (u *UDP) WriteTo(p []byte, a *unix.SockaddrInet4) error {
	for {
		if u.closed.Load() {
			return ErrClosed
		}
		err := unix.Sendto(u.FD, p, 0, a)
		if err == nil {
			return nil
		}
		if err != unix.EAGAIN && err != unix.ENOBUFS {
			return err
		}
	}
}

// TryRead reads one datagram if one is queued: (0, false, nil) when not.
// Datagrams hit by Drop are consumed and reported as not there.
func (u *UDP) TryRead(p []byte) (int, bool, error) {
	n, err := unix.Read(u.FD, p)
	if err == unix.EAGAIN {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if u.Drop.Hit() {
		u.Dropped++
		return 0, false, nil
	}
	return n, true, nil
}

// Read busy-polls for one datagram until Timeout.
func (u *UDP) Read(p []byte) (int, error) {
	var deadline time.Time
	for spins := 0; ; spins++ {
		n, ok, err := u.TryRead(p)
		if ok || err != nil {
			return n, err
		}
		if spins&255 == 255 {
			if u.closed.Load() {
				return 0, ErrClosed
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(u.Timeout)
			} else if now.After(deadline) {
				return 0, errTimeout
			}
		}
	}
}

// Close flags the socket closed; the fd is released by Release once no
// loop uses it any more.
func (u *UDP) Close() { u.closed.Store(true) }

// Closed reports whether Close was called.
func (u *UDP) Closed() bool { return u.closed.Load() }

// Release closes the fd. Call it after the loops using u have returned.
func (u *UDP) Release() { unix.Close(u.FD) }

// Stream is a connected non-blocking TCP socket read and written by
// spinning.
type Stream struct {
	FD      int
	closed  atomic.Bool
	Timeout time.Duration
}

// TCPPair returns the two ends of a TCP connection on 127.0.0.1 with
// TCP_NODELAY set on both, non-blocking after the handshake.
func TCPPair() (client, server *Stream, err error) {
	in := func(f func() error) error { return f() }
	lo := [4]byte{127, 0, 0, 1}
	return TCPPairOn(in, lo, in, lo)
}

// handshakeTimeout bounds TCPPairOn's connect and accept.
const handshakeTimeout = 20 * time.Second

// TCPPairOn is TCPPair with the client's socket created by inC and bound
// to c, the server's by inS on s (in and the address as ListenUDPOn's).
func TCPPairOn(inC func(func() error) error, c [4]byte, inS func(func() error) error, s [4]byte) (client, server *Stream, err error) {
	var lfd, cfd int
	if err := inS(func() (err error) {
		lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		return nil, nil, err
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: s}); err != nil {
		return nil, nil, err
	}
	if err := unix.Listen(lfd, 1); err != nil {
		return nil, nil, err
	}
	// Over a lossy link the handshake can fail for good: a lost final ACK
	// leaves connect done and accept waiting, and once the server gives up
	// its SYN-ACK retries accept waits forever. Both wait at most
	// handshakeTimeout each (accept and a blocking connect honour the
	// socket timeouts handshake sets).
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		return nil, nil, err
	}
	if err := inC(func() (err error) {
		cfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		return nil, nil, err
	}
	if err := unix.Bind(cfd, &unix.SockaddrInet4{Addr: c}); err != nil {
		unix.Close(cfd)
		return nil, nil, err
	}
	if err := handshake(cfd, unix.SO_SNDTIMEO, time.Now().Add(handshakeTimeout), func() error { return unix.Connect(cfd, sa) }); err != nil {
		unix.Close(cfd)
		return nil, nil, fmt.Errorf("tcp connect (handshake, at most %v): %w", handshakeTimeout, err)
	}
	var sfd int
	err = handshake(lfd, unix.SO_RCVTIMEO, time.Now().Add(handshakeTimeout), func() (err error) {
		sfd, _, err = unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		return err
	})
	if err != nil {
		unix.Close(cfd)
		return nil, nil, fmt.Errorf("tcp accept (handshake not completed in %v: lost ACKs on a lossy link): %w", handshakeTimeout, err)
	}
	for _, fd := range []int{cfd, sfd} {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		unix.SetNonblock(fd, true)
	}
	return &Stream{FD: cfd, Timeout: 2 * time.Second}, &Stream{FD: sfd, Timeout: 2 * time.Second}, nil
}

// handshake runs call, a blocking connect or accept on fd that the
// socket timeout opt bounds, until it returns anything but EINTR, with
// opt set to the time left before deadline for each try (ETIMEDOUT once
// none is left). A signal interrupts a connect or an accept whose socket
// has a timeout even under SA_RESTART (signal(7)), and the Go runtime
// signals its threads (preemption); on Linux a connect called again
// after EINTR goes on waiting for the same handshake, and an accept for
// the same queue.
func handshake(fd, opt int, deadline time.Time, call func() error) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		tv := unix.NsecToTimeval(max(left.Nanoseconds(), int64(time.Microsecond)))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return err
		}
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}

// WriteAll writes every byte of p, spinning on EAGAIN.
func (s *Stream) WriteAll(p []byte) error {
	var w Wait
	for len(p) > 0 {
		if s.closed.Load() {
			return ErrClosed
		}
		n, err := unix.Write(s.FD, p)
		if err == unix.EAGAIN {
			// A full send buffer for Timeout on end (a lossy link's
			// retransmission backoff) is a timeout, not a hang.
			if err := w.Idle(s.Closed, s.Timeout); err != nil {
				return err
			}
			continue
		}
		w = Wait{}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// ReadFull fills p, spinning on EAGAIN until Timeout without progress.
func (s *Stream) ReadFull(p []byte) error {
	var deadline time.Time
	spins := 0
	for len(p) > 0 {
		n, err := unix.Read(s.FD, p)
		if err == nil && n == 0 {
			return ErrClosed // orderly shutdown by the peer
		}
		if err == nil {
			p = p[n:]
			deadline = time.Time{}
			continue
		}
		if err != unix.EAGAIN {
			return err
		}
		spins++
		if spins&255 == 0 {
			if s.closed.Load() {
				return ErrClosed
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(s.Timeout)
			} else if now.After(deadline) {
				return errTimeout
			}
		}
	}
	return nil
}

// Close flags the stream closed and shuts the connection down (which
// wakes the other end); Release closes the fd.
func (s *Stream) Close() {
	s.closed.Store(true)
	unix.Shutdown(s.FD, unix.SHUT_RDWR)
}

// Release closes the fd after the loops using s have returned.
func (s *Stream) Release() { unix.Close(s.FD) }

// Wait paces an empty poll loop: call Idle after each empty poll; it
// checks the close flag and the deadline every 256 calls.
type Wait struct {
	spins    int
	deadline time.Time
}

// Idle returns ErrClosed once closed is set, errTimeout once timeout has
// passed since the first empty poll, else nil.
func (w *Wait) Idle(closed func() bool, timeout time.Duration) error {
	w.spins++
	if w.spins&255 != 0 {
		return nil
	}
	if closed() {
		return ErrClosed
	}
	now := time.Now()
	if w.deadline.IsZero() {
		w.deadline = now.Add(timeout)
	} else if now.After(w.deadline) {
		return errTimeout
	}
	return nil
}

// Closed reports whether Close was called.
func (s *Stream) Closed() bool { return s.closed.Load() }
