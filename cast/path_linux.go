package cast

import (
	"net/netip"

	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/udp"
)

// openUDP opens the default datapath of a Producer or Consumer: on Linux
// datapath/udp (one sendto/recvfrom per datagram on a raw non-blocking
// socket), bound to local (zero: the unspecified address of peer's
// family, a free port) and connected to peer when peer is valid.
func openUDP(local, peer netip.AddrPort) (datapath.Path, error) {
	c := udp.DefaultConfig()
	c.Local, c.Peer = local, peer
	return udp.New(c)
}
