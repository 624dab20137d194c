//go:build !linux

package cast

import (
	"net/netip"

	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/udp"
)

// openUDP opens the default datapath of a Producer or Consumer. Off
// Linux this is still udp.New, which reports that raw sockets are
// Linux-only, until the portable path lands.
func openUDP(local, peer netip.AddrPort) (datapath.Path, error) {
	c := udp.DefaultConfig()
	c.Local, c.Peer = local, peer
	return udp.New(c)
}
