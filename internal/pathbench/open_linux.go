package pathbench

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/datapath/xdp"
	"github.com/walcast/walcast/internal/netns"
)

// Ports of the two ends. The namespaces are the bench's own, so fixed
// ports cannot collide with anything; AF_XDP needs them fixed anyway (its
// redirect program matches a port, and no kernel socket picks one).
const portA, portB = 7001, 7000

// errRefused marks an open that failed because the kernel refused the
// mode (attach mode, socket type, bind flags), not because of the bench.
var errRefused = errors.New("refused by the kernel")

// streamRxFrames is the receive frames (at most; see xdp.Config.FillFrames)
// of the AF_XDP paths in the throughput and loss rows: room for a window of
// 1443-byte records while the receiving loop is descheduled. The rtt rows
// use the path's default.
const streamRxFrames = 8192

// openPath opens spec s on host h at local port, sending to peer.
func openPath(s Spec, h netns.Host, port uint16, peer netip.AddrPort, stream bool) (datapath.Path, error) {
	local := netip.AddrPortFrom(h.Addr, port)
	var p datapath.Path
	err := h.Do(func() error {
		switch s.Kind {
		case "udp":
			c := udp.DefaultConfig()
			c.Local, c.Peer = local, peer
			if s.BusyPoll >= 0 {
				c.BusyPollUS = s.BusyPoll
				if s.BusyPoll == 0 {
					c.BusyPollUS = -1 // off (a zero field means the default)
				}
			}
			u, err := udp.New(c)
			if err != nil {
				return err
			}
			p = u
		case "mmsg":
			c := mmsg.DefaultConfig()
			c.Local, c.Peer, c.Batch, c.NoGSO, c.NoGRO = local, peer, s.Batch, !s.GSO, !s.GSO
			if s.BusyPoll >= 0 {
				c.BusyPollUS = s.BusyPoll
				if s.BusyPoll == 0 {
					c.BusyPollUS = -1 // off (a zero field means the default)
				}
			}
			m, err := mmsg.New(c)
			if err != nil {
				return err
			}
			p = m
		case "xdp":
			c := xdp.DefaultConfig()
			c.Interface, c.Local, c.Peer, c.PeerMAC = h.Link, local, peer, nil
			c.XDPMode, c.BusyPoll, c.BusyPollAlways, c.NeedWakeup = s.Attach, s.BusyPoll, s.BusyAlways, !s.NoWakeup
			if stream {
				c.RxFrames = streamRxFrames
			}
			if s.RxFrames > 0 {
				c.RxFrames = s.RxFrames
			}
			c.FillFrames = min(s.FillFrames, c.RxFrames)
			x, err := xdp.Open(c)
			if err != nil {
				return fmt.Errorf("%w: %w", errRefused, err)
			}
			p = x
		default:
			return fmt.Errorf("pathbench: unknown kind %q", s.Kind)
		}
		return nil
	})
	return p, err
}

// openPair opens s on a (port A, peer b) and on b (port B, peer a); stream
// sizes AF_XDP's receive frames for a stream rather than a ping-pong.
func openPair(s Spec, a, b netns.Host, stream bool) (pa, pb datapath.Path, err error) {
	if pb, err = openPath(s, b, portB, netip.AddrPortFrom(a.Addr, portA), stream); err != nil {
		return nil, nil, err
	}
	if pa, err = openPath(s, a, portA, netip.AddrPortFrom(b.Addr, portB), stream); err != nil {
		pb.Close()
		return nil, nil, err
	}
	return pa, pb, nil
}

// pathNote says how a path ended up configured: what the kernel refused
// and whether busy polling can act. Call it after traffic (NAPI ids are
// learned from received frames).
func pathNote(p datapath.Path) string {
	switch x := p.(type) {
	case *udp.Path:
		return fmt.Sprintf("busy poll %d µs, NAPI id %d%s", x.BusyPoll(), x.NAPIID(), inert(x.BusyPoll(), x.NAPIID()))
	case *mmsg.Path:
		f := x.Features()
		s := fmt.Sprintf("busy poll %d µs, NAPI id %d%s", f.BusyPoll, x.NAPIID(), inert(f.BusyPoll, x.NAPIID()))
		if f.GSOReason != "" {
			s += "; GSO off: " + f.GSOReason
		}
		if f.GROReason != "" {
			s += "; GRO off: " + f.GROReason
		}
		return s
	case *xdp.Path:
		s := fmt.Sprintf("%v attach, copy mode", x.Mode())
		if x.ZeroCopy() {
			s = fmt.Sprintf("%v attach, zero-copy", x.Mode())
		}
		if err := x.ZeroCopyErr(); err != nil {
			s += fmt.Sprintf(" (zero-copy refused: %v)", err)
		}
		return s + fmt.Sprintf(", NAPI id %d, TX budget %d", x.NAPIID(), x.TxBudget())
	}
	return ""
}

func inert(busy, napi int) string {
	if busy > 0 && napi == 0 {
		return " (busy polling inert: no NAPI context)"
	}
	return ""
}
