package sock

import (
	"errors"
	"net/netip"
)

// Config says how to open a socket.
type Config struct {
	Local      netip.AddrPort // bind address; port 0 picks one
	Peer       netip.AddrPort // when valid, the socket is connected to it
	SockBuf    int            // SO_RCVBUF and SO_SNDBUF, bytes
	BusyPollUS int            // SO_BUSY_POLL, µs (0 = leave off)
	GRO        bool           // enable UDP_GRO
}

// ErrNotSupported is returned on platforms without raw UDP sockets.
var ErrNotSupported = errors.New("sock: raw UDP sockets are Linux-only")
