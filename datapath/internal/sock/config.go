package sock

import (
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/internal/defaults"
)

// Defaults of the socket options udp and mmsg share.
const (
	DefaultSockBuf    = 8 << 20 // bytes
	DefaultBusyPollUS = 50      // µs
)

// WithDefaults maps the zero SockBuf and BusyPollUS to their defaults and
// a negative BusyPollUS to off, the rule of udp.Config and mmsg.Config.
func (c Config) WithDefaults() Config {
	c.SockBuf = defaults.Or(c.SockBuf, DefaultSockBuf)
	c.BusyPollUS = defaults.Off(c.BusyPollUS, DefaultBusyPollUS)
	return c
}

// Check reports, as package pkg's configuration error, a Config that
// cannot work: a negative buffer, a bad multicast setting, or a local
// address and a peer of different families.
func (c Config) Check(pkg string, sentinel error) error {
	switch {
	case c.SockBuf < 0:
		return cfgerr.New(pkg, sentinel, "SockBuf", "%d is negative", c.SockBuf)
	case c.Local.IsValid() && c.Peer.IsValid() && c.Local.Addr().Unmap().Is4() != c.Peer.Addr().Unmap().Is4():
		return cfgerr.New(pkg, sentinel, "Peer", "%s and Local %s are of different address families", c.Peer, c.Local)
	}
	if c.Multicast.Enabled() {
		v6 := c.Local.IsValid() && c.Local.Addr().Is6() && !c.Local.Addr().Is4In6()
		return cfgerr.Nest(pkg, sentinel, "Multicast", c.Multicast.Validate(v6))
	}
	return nil
}
