package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/bpf"
)

// NewLAN creates a LAN for a test and removes it in tb.Cleanup (also when
// the test fails). It skips like New.
func NewLAN(tb testing.TB, c LANConfig) *LAN {
	tb.Helper()
	return forTest(tb, func() (*LAN, error) { return CreateLAN(c) })
}

// CreateLAN builds a LAN. On error it returns the partly built LAN (so
// that Close can remove what exists) together with the error.
func CreateLAN(c LANConfig) (*LAN, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	id := uniqueID(10) // "wc"+id+"p15" fits IFNAMSIZ
	ns := nsPrefix(c.Tag) + id
	l := &LAN{Switch: ns + "-sw", Bridge: "wc" + id + "br", Cfg: c}
	q := strconv.Itoa(c.Queues)
	steps := [][]string{{"netns", "add", l.Switch}}
	for i := range c.Hosts {
		a := hostAddr(c.Prefix, i)
		h := Host{NS: ns + "-h" + strconv.Itoa(i), Link: "wc" + id + "h" + strconv.Itoa(i), Addr: a, Prefix: netip.PrefixFrom(a, c.Prefix.Bits())}
		if c.Prefix6.IsValid() {
			h.Addr6 = hostAddr(c.Prefix6, i)
		}
		l.Hosts = append(l.Hosts, h)
		l.Ports = append(l.Ports, Host{NS: l.Switch, Link: "wc" + id + "p" + strconv.Itoa(i)})
	}
	for i, h := range l.Hosts {
		steps = append(steps, []string{"netns", "add", h.NS})
		steps = append(steps, []string{"link", "add", h.Link, "netns", h.NS, "numtxqueues", q, "numrxqueues", q,
			"type", "veth", "peer", "name", l.Ports[i].Link, "netns", l.Switch, "numtxqueues", q, "numrxqueues", q})
	}
	steps = append(steps,
		[]string{"-n", l.Switch, "link", "set", "lo", "up"},
		[]string{"-n", l.Switch, "link", "add", l.Bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
	)
	mtu := func(ns, link string) {
		if c.MTU != 0 {
			steps = append(steps, []string{"-n", ns, "link", "set", link, "mtu", strconv.Itoa(c.MTU)})
		}
	}
	for i, h := range l.Hosts {
		p := l.Ports[i]
		mtu(h.NS, h.Link)
		mtu(p.NS, p.Link)
		steps = append(steps,
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
			[]string{"-n", h.NS, "addr", "add", h.Prefix.String(), "dev", h.Link},
		)
		if h.Addr6.IsValid() {
			steps = append(steps, []string{"-n", h.NS, "-6", "addr", "add", netip.PrefixFrom(h.Addr6, c.Prefix6.Bits()).String(), "dev", h.Link, "nodad"})
		}
		steps = append(steps,
			[]string{"-n", h.NS, "link", "set", h.Link, "up"},
			[]string{"-n", l.Switch, "link", "set", p.Link, "master", l.Bridge},
			[]string{"-n", l.Switch, "link", "set", p.Link, "up"},
		)
	}
	mtu(l.Switch, l.Bridge)
	steps = append(steps, []string{"-n", l.Switch, "link", "set", l.Bridge, "up"})
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return l, err
		}
	}
	for i := range l.Hosts {
		for _, h := range []*Host{&l.Hosts[i], &l.Ports[i]} {
			if err := h.readLink("off"); err != nil {
				return l, err
			}
		}
		if !c.SegmentOffload {
			h := l.Hosts[i]
			if _, err := h.Exec("ethtool", "-K", h.Link, "tx-udp-segmentation", "off"); err != nil {
				return l, err
			}
		}
	}
	if err := l.waitUp(10 * time.Second); err != nil {
		return l, err
	}
	if c.StaticNeigh {
		for _, h := range l.Hosts {
			for _, peer := range l.Hosts {
				if peer.NS == h.NS {
					continue
				}
				if err := h.staticNeigh(peer); err != nil {
					return l, err
				}
			}
		}
	}
	return l, nil
}

// waitUp waits until the bridge and every port are operationally up: the
// carrier reaches the bridge through linkwatch, which may take a second,
// and a port forwards nothing before.
func (l *LAN) waitUp(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		out, err := exec.Command("ip", "-n", l.Switch, "-br", "link", "show").CombinedOutput()
		if err != nil {
			return fmt.Errorf("netns: ip -n %s link show: %w: %s", l.Switch, err, out)
		}
		up := 0
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[1] == "UP" && strings.HasPrefix(f[0], "wc") {
				up++
			}
		}
		if up == len(l.Ports)+1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: %d of %d bridge links up in %s after %v:\n%s", up, len(l.Ports)+1, l.Switch, limit, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close deletes every namespace of the LAN (and with them the links and
// the bridge). It is safe on a partly built LAN and more than once.
func (l *LAN) Close() error {
	var errs []error
	nss := []string{l.Switch}
	for _, h := range l.Hosts {
		nss = append(nss, h.NS)
	}
	for _, ns := range nss {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		if err := ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// AttachTCImpair loads the tc impair program with c and attaches it to
// h's link in direction d (on a LAN port, egress is what the switch
// forwards to that port's host). The caller closes the returned TCImpair
// to detach it; the mode used is returned.
func (h Host) AttachTCImpair(c bpf.ImpairConfig, d bpf.Direction, m bpf.TCMode) (*bpf.TCImpair, bpf.TCMode, error) {
	im, err := bpf.NewTCImpair(c)
	if err != nil {
		return nil, 0, err
	}
	var mode bpf.TCMode
	if err := h.Do(func() error {
		var err error
		mode, err = im.Attach(h.Index, d, m)
		return err
	}); err != nil {
		im.Close()
		return nil, 0, err
	}
	return im, mode, nil
}
