package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
)

// mcastFlags are the multicast flags of `cast send` (-to GROUP:PORT) and
// `cast recv` (-group GROUP:PORT): the stream's data goes to the group,
// and the receivers' NAKs and Status go to the control group (the next
// address, same port), which the sender and every receiver join, so a
// receiver hears the others' NAKs.
type mcastFlags struct {
	iface   string
	ttl     int
	noLoop  bool
	control string
	sources string
	flow    string
	tagged  string

	group, ctrl netip.AddrPort // resolved by resolve
}

func (m *mcastFlags) add(fs *flag.FlagSet, recv bool) {
	fs.StringVar(&m.iface, "iface", "", "multicast: the interface to send to and join the group on (needed where no route leads to the group, e.g. in a network namespace)")
	fs.StringVar(&m.control, "control", "", "multicast: control group GROUP:PORT for NAKs and Status (default: the group address + 1, same port)")
	if recv {
		fs.StringVar(&m.sources, "source", "", "multicast: accept the group only from these sender addresses (comma-separated; source-specific multicast)")
		return
	}
	fs.IntVar(&m.ttl, "ttl", 1, "multicast: hop limit of the datagrams (1: the local link)")
	fs.StringVar(&m.flow, "flow", "min", "with several receivers: pace to the slowest (min), the fastest (max), or the slowest of -tagged receiver ids (tagged); the others repair from the WAL or catch up over TCP")
	fs.StringVar(&m.tagged, "tagged", "", "with -flow tagged: the receiver ids (their -id) to wait for, comma-separated")
	fs.BoolVar(&m.noLoop, "noloop", false, "multicast: do not loop the group's datagrams back to receivers on this host")
}

// resolve checks the flags against the group address; it returns false
// (and no error) when addr is not a multicast group and no multicast
// flag was given.
func (m *mcastFlags) resolve(flagName string, addr netip.AddrPort) (bool, error) {
	if !addr.Addr().IsMulticast() {
		if m.iface != "" || m.control != "" || m.sources != "" {
			return false, usagef("-iface, -control and -source need -%s to be a multicast GROUP:PORT, not %s", flagName, addr)
		}
		return false, nil
	}
	if err := checkRange("ttl", m.ttl, 0, 255); err != nil {
		return false, err
	}
	m.group = addr
	if m.control != "" {
		c, err := addrFlag("control", m.control, true)
		if err != nil {
			return false, err
		}
		if !c.Addr().IsMulticast() || c.Addr().Is4() != addr.Addr().Is4() {
			return false, usagef("-control %s: want a multicast GROUP:PORT of the same family as %s", c, addr)
		}
		m.ctrl = c
	} else if m.ctrl = datapath.ControlGroup(addr); !m.ctrl.IsValid() {
		return false, usagef("-%s %s: the next address is not multicast; name the control group with -control", flagName, addr)
	}
	if m.ctrl.Port() != addr.Port() {
		// One socket listens on one port; the sender must receive the
		// control group where its data socket is bound.
		return false, usagef("-control %s: must use the group's port %d", m.ctrl, addr.Port())
	}
	return true, nil
}

// local is the address a group member binds: the unspecified address
// of the group's family on the group's port.
func (m *mcastFlags) local() netip.AddrPort {
	a := netip.IPv4Unspecified()
	if m.group.Addr().Is6() && !m.group.Addr().Is4In6() {
		a = netip.IPv6Unspecified()
	}
	return netip.AddrPortFrom(a, m.group.Port())
}

// sender returns the sender's socket options: it joins the control group.
func (m *mcastFlags) sender() datapath.Multicast {
	return datapath.Multicast{Iface: m.iface, Groups: []netip.Addr{m.ctrl.Addr()}, TTL: m.ttl, NoLoop: m.noLoop}
}

// receiver returns a receiver's socket options: it joins the group and
// the control group (to hear the other receivers' NAKs).
func (m *mcastFlags) receiver() (datapath.Multicast, error) {
	mc := datapath.Multicast{Iface: m.iface, Groups: []netip.Addr{m.group.Addr(), m.ctrl.Addr()}}
	if m.sources != "" {
		for _, s := range strings.Split(m.sources, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				return mc, usagef("-source %q: %v", s, err)
			}
			mc.Sources = append(mc.Sources, a)
		}
		// The control group carries the other receivers' frames: a source
		// filter would hide them, so only the data group is filtered.
		mc.Groups, mc.AnySource = mc.Groups[:1], mc.Groups[1:]
	}
	return mc, nil
}

// flowPolicy is the policy and the tagged ids of -flow and -tagged (any
// sender: with one receiver every policy is unicast flow control).
func (m *mcastFlags) flowPolicy() (p protocol.FlowPolicy, tagged []uint64, err error) {
	p, err = protocol.ParseFlowPolicy(m.flow)
	if err != nil {
		return p, nil, usagef("-flow %q: want min, max or tagged", m.flow)
	}
	if m.tagged != "" {
		for _, f := range strings.Split(m.tagged, ",") {
			id, err := strconv.ParseUint(strings.TrimSpace(f), 0, 64)
			if err != nil || id == 0 {
				return p, nil, usagef("-tagged %q: want nonzero receiver ids", f)
			}
			tagged = append(tagged, id)
		}
	}
	if (p == protocol.FlowTagged) != (len(tagged) > 0) {
		return p, nil, usagef("-flow tagged and -tagged go together")
	}
	return p, tagged, nil
}

func (m *mcastFlags) String() string {
	return fmt.Sprintf("group %s (control %s) on %s", m.group, m.ctrl, ifaceName(m.iface))
}

func ifaceName(s string) string {
	if s == "" {
		return "the route's interface"
	}
	return s
}

// flagGiven reports whether the flag was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
