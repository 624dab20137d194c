package sock

import (
	"errors"

	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/walcast/walcast/batch"
	"golang.org/x/sys/unix"
)

// Socket is an open, bound, non-blocking UDP socket.
type Socket struct {
	closed   atomic.Bool // set first by Close; beside FD, on the cache line Send and Recv load
	FD       int
	Family   int            // unix.AF_INET or unix.AF_INET6
	Local    netip.AddrPort // after bind
	Peer     netip.AddrPort // valid when connected
	BusyPoll int            // SO_BUSY_POLL in effect, µs (0 when refused or off)
	RcvBuf   int            // effective receive buffer, bytes (as the kernel reports it)
	SndBuf   int            // effective send buffer, bytes
	GRO      bool           // UDP_GRO is on

	mu       sync.Mutex
	file     *os.File // a dup of FD, registered with the netpoller on the first Wait
	rc       syscall.RawConn
	released bool           // the fd (and file) are closed
	deadline time.Time      // the read deadline last set by Wait
	waiting  int            // Waits in flight (under mu)
	waiters  sync.WaitGroup // the same, for Close

	// RecvWait state: the callback is bound once so parking allocates nothing.
	recv   func(*batch.Vec) (int, error)
	wv     *batch.Vec
	wn     int
	werr   error
	waitFn func(fd uintptr) bool
}

// Open creates, configures, binds and (with a valid Peer) connects a UDP
// socket. Binding a port already in use fails with a *net.OpError that
// wraps syscall.EADDRINUSE, naming the address.
func Open(c Config) (*Socket, error) {
	local := c.Local
	if !local.IsValid() {
		if c.Peer.IsValid() && c.Peer.Addr().Is6() && !c.Peer.Addr().Is4In6() {
			local = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
		} else {
			local = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
	}
	family := unix.AF_INET
	if local.Addr().Is6() && !local.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	if family == unix.AF_INET {
		local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, OpError("socket", local, err)
	}
	s := &Socket{FD: fd, Family: family}
	if err := s.configure(c); err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifindex := 0
	if c.Multicast.Enabled() {
		if ifindex, err = multicastPreBind(fd, family, c.Multicast); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	var sa batchSockaddr
	salen := batch.PutSockaddr(&sa, family, local)
	if err := bindRaw(fd, &sa, salen); err != nil {
		unix.Close(fd)
		return nil, OpError("bind", local, err)
	}
	if len(c.Multicast.Groups)+len(c.Multicast.AnySource) > 0 {
		if err := multicastJoin(fd, family, ifindex, c.Multicast); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if c.Peer.IsValid() {
		salen := batch.PutSockaddr(&sa, family, c.Peer)
		if salen == 0 {
			unix.Close(fd)
			return nil, OpError("connect", c.Peer, errors.New("address family differs from the local address"))
		}
		if err := connectRaw(fd, &sa, salen); err != nil {
			unix.Close(fd)
			return nil, OpError("connect", c.Peer, err)
		}
		s.Peer = c.Peer
	}
	sl := uint32(unix.SizeofSockaddrInet6)
	if err := getsocknameRaw(fd, &sa, &sl); err != nil {
		unix.Close(fd)
		return nil, OpError("getsockname", local, err)
	}
	s.Local = batch.ParseSockaddr(&sa)
	return s, nil
}

func (s *Socket) configure(c Config) error {
	fd := s.FD
	if c.SockBuf > 0 {
		// *BUFFORCE ignores net.core.{r,w}mem_max but needs CAP_NET_ADMIN;
		// fall back to the capped option when it is refused.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, c.SockBuf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, c.SockBuf)
		}
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, c.SockBuf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, c.SockBuf)
		}
	}
	s.RcvBuf, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	s.SndBuf, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if c.BusyPollUS > 0 {
		// A non-blocking recv with SO_BUSY_POLL > 0 runs one NAPI poll of
		// the device queue per call when the socket has a NAPI id
		// (sk_busy_loop with nonblock); without one it costs a branch.
		// Older kernels need CAP_NET_ADMIN to raise it: tolerate EPERM.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, c.BusyPollUS) == nil {
			s.BusyPoll = c.BusyPollUS
		}
	}
	// The kernel's receive-queue drop counter, read from each recvmmsg.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	if c.GRO {
		if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
			return &batch.UnsupportedError{Feature: "UDP GRO", Reason: "setsockopt UDP_GRO", Err: err}
		}
		s.GRO = true
	}
	return nil
}

// NAPIID is the NAPI id of the device queue the last packet arrived on
// (SO_INCOMING_NAPI_ID); 0 means no NAPI context (loopback, plain veth),
// where SO_BUSY_POLL does nothing.
func (s *Socket) NAPIID() int {
	id, _ := unix.GetsockoptInt(s.FD, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	return id
}

// Wait parks the calling goroutine on Go's netpoller until f returns
// true, f being called with (a dup of) the socket's fd whenever it may be readable
// (and once at once). A zero deadline waits forever. It returns
// os.ErrDeadlineExceeded at the deadline and net.ErrClosed after Close.
// The first call registers a dup of the fd with the netpoller, until
// ReleaseWait.
func (s *Socket) Wait(deadline time.Time, f func(fd uintptr) bool) error {
	rc, file, err := s.rawConn()
	if err != nil {
		return err
	}
	defer s.waitDone()
	// A loop parks with its next tick as the deadline, the same for every
	// park until the tick: set it only when it changes (each set is a
	// runtime timer modification). A deadline that already passed stays
	// expired in the poller, so reusing it times out at once, as it must.
	if !deadline.Equal(s.deadline) {
		if err := file.SetReadDeadline(deadline); err != nil {
			return err
		}
		s.deadline = deadline
	}
	return rc.Read(f)
}

// rawConn returns the netpoller's handle on the socket, registering it
// first if needed, and counts a Wait in flight (waitDone ends it).
func (s *Socket) rawConn() (syscall.RawConn, *os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, nil, net.ErrClosed
	}
	if s.rc == nil {
		// A dup of the fd (the same socket), so that ReleaseWait can take
		// it out of the netpoller again by closing the os.File (whose
		// close deletes it from the runtime's epoll set) while FD stays
		// open. The socket is non-blocking, so os.NewFile registers the
		// dup with the netpoller (kindNonBlock) and RawConn.Read parks on
		// EAGAIN.
		fd, err := unix.FcntlInt(uintptr(s.FD), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, nil, OpError("dup", s.Local, err)
		}
		f := os.NewFile(uintptr(fd), "udp")
		rc, err := f.SyscallConn()
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		s.file, s.rc = f, rc
	}
	s.waiting++
	s.waiters.Add(1)
	return s.rc, s.file, nil
}

func (s *Socket) waitDone() {
	s.mu.Lock()
	s.waiting--
	s.mu.Unlock()
	s.waiters.Done()
}

// ReleaseWait takes the socket out of Go's netpoller, where the first
// Wait put it (a later Wait puts it back). Call it when the socket will
// only be polled from now on (a spinning loop): registered, every
// datagram that arrives wakes an idle runtime thread to report a socket
// nobody waits on, a fraction of a CPU at 100 k datagrams/s, taken from
// the other threads. It does nothing while a Wait is in flight.
func (s *Socket) ReleaseWait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil || s.waiting > 0 || s.released {
		return
	}
	_ = s.file.Close()
	s.file, s.rc, s.deadline = nil, nil, time.Time{}
}

// BindRecv sets the non-blocking receive call RecvWait retries each time
// the socket may be readable: the path's Recv. Call it once, after Open.
func (s *Socket) BindRecv(recv func(*batch.Vec) (int, error)) {
	s.recv = recv
	s.waitFn = func(uintptr) bool {
		s.wn, s.werr = s.recv(s.wv)
		return s.wn > 0 || s.werr != nil
	}
}

// RecvWait is the bound receive call that parks the calling goroutine on
// Go's netpoller until at least one datagram is ready or the deadline
// passes (zero deadline: no limit). It returns (0, nil) at the deadline
// and datapath.ErrClosed when the socket is closed while it waits. It
// allocates nothing.
func (s *Socket) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	if n, err := s.recv(v); n > 0 || err != nil {
		return n, err
	}
	s.wv = v
	err := s.Wait(deadline, s.waitFn)
	s.wv = nil
	if ready, err := WaitResult(err, s.closed.Load()); !ready {
		return 0, err
	}
	return s.wn, s.werr
}

// Closed reports whether Close has been called (one atomic load: the
// paths check it at the top of every Send and Recv).
func (s *Socket) Closed() bool { return s.closed.Load() }

// Close closes the socket; Closed reports true from then on. A goroutine
// parked in Wait wakes with net.ErrClosed; the fd is released only once
// it has left, so the fd number is never reused under a running call.
// Callers must have stopped spinning Send/Recv calls on FD before Close.
// Calling it again does nothing.
func (s *Socket) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	s.released = true
	var ferr error
	if s.file != nil {
		ferr = s.file.Close() // wakes a parked Wait with net.ErrClosed
	}
	s.mu.Unlock()
	// A woken Wait may still be in its receive call on FD: close FD once
	// it has returned.
	s.waiters.Wait()
	return errors.Join(ferr, unix.Close(s.FD))
}

// OpError wraps a failed socket call as the net package does: a
// *net.OpError naming the operation and the address (omitted when
// invalid), whose Err is an *os.SyscallError when err is an errno.
func OpError(op string, ap netip.AddrPort, err error) error {
	if en, ok := err.(unix.Errno); ok {
		err = os.NewSyscallError(op, en)
	}
	var addr net.Addr
	if ap.IsValid() {
		addr = net.UDPAddrFromAddrPort(ap)
	}
	return &net.OpError{Op: op, Net: "udp", Addr: addr, Err: err}
}
