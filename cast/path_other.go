//go:build !linux

package cast

import (
	"net/netip"

	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/stdnet"
)

// openUDP opens the default datapath of a Producer or Consumer: off Linux
// the portable datapath/stdnet (net.UDPConn and a reader goroutine; see
// its package doc for what that costs), bound to local (zero: the
// unspecified address of peer's family, a free port) and connected to
// peer when peer is valid.
func openUDP(local, peer netip.AddrPort) (datapath.Path, error) {
	return stdnet.Listen(stdnet.Config{Local: local, Peer: peer})
}
