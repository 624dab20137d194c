package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
)

// NewBridge creates a bridge of test hosts for a test and removes it in
// tb.Cleanup (also when the test fails). It skips the test when not root
// or when ip(8) is missing, and fails it on any other error.
func NewBridge(tb testing.TB, c BridgeConfig) *Bridge {
	tb.Helper()
	Require(tb)
	b, err := CreateBridge(c)
	if b != nil {
		tb.Cleanup(func() {
			if err := b.Close(); err != nil {
				tb.Errorf("netns cleanup: %v", err)
			}
		})
	}
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// CreateBridge builds a bridge of hosts. Names carry "mc", the process id
// and a counter, so concurrent bridges (and other engineers' pairs) never
// collide. On error it returns the partly built Bridge (so that Close can
// remove what exists) together with the error.
func CreateBridge(c BridgeConfig) (*Bridge, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	n := seq.Add(1)
	id := strconv.FormatUint(uint64(os.Getpid()), 36) + strconv.FormatUint(uint64(n), 36)
	if len(id) > 9 {
		id = id[len(id)-9:]
	}
	b := &Bridge{Switch: "walcast-mc" + id + "-sw", Cfg: c}
	if err := ip("netns", "add", b.Switch); err != nil {
		return b, err
	}
	br := "mc" + id + "br"
	steps := [][]string{
		{"-n", b.Switch, "link", "set", "lo", "up"},
		// mcast_snooping 0: flood multicast like an unmanaged switch, so
		// delivery does not depend on an IGMP report reaching the bridge.
		{"-n", b.Switch, "link", "add", br, "type", "bridge", "mcast_snooping", "0"},
		{"-n", b.Switch, "link", "set", br, "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return b, err
		}
	}
	mtu := []string{}
	if c.MTU != 0 {
		mtu = []string{"mtu", strconv.Itoa(c.MTU)}
	}
	gro := "off"
	if c.GRO {
		gro = "on"
	}
	for i := range c.Hosts {
		si := strconv.Itoa(i)
		h := Host{NS: "walcast-mc" + id + "-h" + si, Link: "mc" + id + "h" + si}
		h.Addr = hostAddr(c.Subnet, i)
		h.Prefix = netip.PrefixFrom(h.Addr, c.Subnet.Bits())
		port := "mc" + id + "p" + si
		if err := ip("netns", "add", h.NS); err != nil {
			return b, err
		}
		b.Hosts = append(b.Hosts, h)
		b.Ports = append(b.Ports, port)
		steps := [][]string{
			{"link", "add", h.Link, "netns", h.NS, "numtxqueues", "1", "numrxqueues", "1",
				"type", "veth", "peer", "name", port, "netns", b.Switch, "numtxqueues", "1", "numrxqueues", "1"},
			append([]string{"-n", b.Switch, "link", "set", port, "master", br, "up"}, mtu...),
			{"-n", h.NS, "link", "set", "lo", "up"},
			{"-n", h.NS, "addr", "add", h.Prefix.String(), "dev", h.Link},
		}
		if c.Subnet6.IsValid() {
			a6 := hostAddr(c.Subnet6, i)
			b.Addr6 = append(b.Addr6, a6)
			steps = append(steps, []string{"-n", h.NS, "-6", "addr", "add",
				netip.PrefixFrom(a6, c.Subnet6.Bits()).String(), "dev", h.Link, "nodad"})
		}
		steps = append(steps, append([]string{"-n", h.NS, "link", "set", h.Link, "up"}, mtu...))
		for _, s := range steps {
			if err := ip(s...); err != nil {
				return b, err
			}
		}
		hp := &b.Hosts[i]
		if err := hp.Do(func() error {
			ifc, err := net.InterfaceByName(hp.Link)
			if err != nil {
				return err
			}
			hp.Index, hp.MAC = ifc.Index, ifc.HardwareAddr
			return nil
		}); err != nil {
			return b, fmt.Errorf("netns: read %s in %s: %w", hp.Link, hp.NS, err)
		}
		if _, err := hp.Exec("ethtool", "-K", hp.Link, "gro", gro); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Close deletes every namespace of the bridge (and with them the veth
// pairs and the bridge). It is safe on a partly built Bridge and more than
// once.
func (b *Bridge) Close() error {
	var errs []error
	names := []string{b.Switch}
	for _, h := range b.Hosts {
		names = append(names, h.NS)
	}
	for _, ns := range names {
		if ns == "" {
			continue
		}
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		if err := ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
