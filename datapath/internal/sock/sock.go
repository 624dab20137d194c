package sock

import (
	"errors"
	"net"
	"net/netip"
	"os"

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

// ErrNotSupported is returned on platforms without raw UDP sockets.
var ErrNotSupported = errors.New("sock: raw UDP sockets are Linux-only")

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
