package mem

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// groupSet is a multicast address and its members in join order.
type groupSet struct {
	members []*End
}

// Join makes e a member of the multicast address group: a datagram any
// End sends to group reaches every member except its sender (like
// multicast with IP_MULTICAST_LOOP off, or from another host), in join
// order. It first crosses the group's upstream link (from → group, set
// with Impair(from, group, …): loss there is shared by every member) and
// then each member's own link (from → member: independent loss, delay,
// duplication, reordering and corruption per receiver). Joining twice is
// a no-op.
func (n *Network) Join(group netip.AddrPort, e *End) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !group.Addr().IsMulticast() {
		return fmt.Errorf("mem: join %v: not a multicast address", group)
	}
	if e.closed {
		return fmt.Errorf("mem: join %v: end %v is closed", group, e.addr)
	}
	if n.groups == nil {
		n.groups = map[netip.AddrPort]*groupSet{}
	}
	g := n.groups[group]
	if g == nil {
		g = &groupSet{}
		n.groups[group] = g
	}
	if !slices.Contains(g.members, e) {
		g.members = append(g.members, e)
	}
	return nil
}

// Leave removes e from group (no-op when it is not a member). A closed
// End leaves every group.
func (n *Network) Leave(group netip.AddrPort, e *End) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if g := n.groups[group]; g != nil {
		g.members = slices.DeleteFunc(g.members, func(m *End) bool { return m == e })
	}
}

func (n *Network) leaveAll(e *End) {
	for _, g := range n.groups {
		g.members = slices.DeleteFunc(g.members, func(m *End) bool { return m == e })
	}
}

// sendGroup crosses the upstream link from → to once, then fans b out to
// every member but the sender through its own link. The upstream link
// applies Drop, Blackouts, DropProb, Script's Drop and Latency; the other
// impairments belong to the members' links.
func (n *Network) sendGroup(from, to netip.AddrPort, g *groupSet, b []byte, now int64) {
	up := n.link(from, to)
	up.stats.Sent++
	if up.decide(b, now)&Drop != 0 {
		up.stats.Dropped++
		return
	}
	up.stats.Delivered++
	for _, m := range g.members {
		if m.addr != from {
			n.sendLink(from, m.addr, b, now, up.imp.Latency)
		}
	}
}

// Fanout is the usual one-to-many test set-up: a clock, a network, a
// sender S at 10.0.0.1:1000 and N receivers R[i] at 10.0.1.(i+1):2000.
// Data goes to Group (239.0.0.1:3000), which every receiver joins;
// receivers send their control frames to Control (239.0.0.2:3000), which
// the sender and every receiver join, so each receiver hears the others'
// NAKs. S's zero-address sends go to Group, each receiver's to Control.
type Fanout struct {
	Clock          *Clock
	Net            *Network
	S              *End
	R              []*End
	Group, Control netip.AddrPort
}

// Addresses of a Fanout.
var (
	FanoutSender  = netip.MustParseAddrPort("10.0.0.1:1000")
	FanoutGroup   = netip.MustParseAddrPort("239.0.0.1:3000")
	FanoutControl = netip.MustParseAddrPort("239.0.0.2:3000")
)

// FanoutReceiver is the address of receiver i (0-based) of a Fanout.
func FanoutReceiver(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1 + byte(i/250), byte(1 + i%250)}), 2000)
}

// NewFanout returns a Fanout of n receivers (1..1000) on a fresh virtual
// clock starting at start ns. Give receiver i independent loss with
// f.Net.Impair(FanoutSender, FanoutReceiver(i), …), loss shared by all
// with f.Net.Impair(FanoutSender, FanoutGroup, …), and control-frame loss
// with Impair(FanoutReceiver(i), FanoutSender, …) or Impair(…, FanoutControl, …).
func NewFanout(start int64, n int) *Fanout {
	if n < 1 || n > 1000 {
		panic(fmt.Sprintf("mem: NewFanout with %d receivers", n))
	}
	c := NewClock(start)
	net := NewNetwork(c)
	f := &Fanout{Clock: c, Net: net, Group: FanoutGroup, Control: FanoutControl}
	f.S, _ = net.Listen(FanoutSender, FanoutGroup)
	_ = net.Join(FanoutControl, f.S)
	for i := range n {
		r, _ := net.Listen(FanoutReceiver(i), FanoutControl)
		_ = net.Join(FanoutGroup, r)
		_ = net.Join(FanoutControl, r)
		f.R = append(f.R, r)
	}
	return f
}

// Advance moves the fan-out's clock forward by d and returns the new time.
func (f *Fanout) Advance(d time.Duration) int64 { return f.Clock.Advance(d) }
