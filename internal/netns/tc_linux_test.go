package netns

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/bpf"
)

// pingWait bounds one ICMP round trip; generous for a loaded machine.
const pingWait = 5 * time.Second

// tcShow runs `tc KIND show dev LINK [egress]` in h.
func tcShow(t *testing.T, h Host, args ...string) string {
	t.Helper()
	out, err := h.Exec("tc", append(args[:1:1], append([]string{"show", "dev", h.Link}, args[1:]...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestTCImpairEgress drops on A's egress (datagrams A sends), in both
// attach modes, and leaves nothing behind on Close.
func TestTCImpairEgress(t *testing.T) {
	for _, mode := range []bpf.TCMode{bpf.TCX, bpf.TCClsact} {
		t.Run(mode.String(), func(t *testing.T) {
			c := DefaultConfig()
			c.Tag = "xdp"
			p := New(t, c)
			im, got, err := p.A.AttachTCImpair(bpf.ImpairConfig{Port: 9000, EveryNth: 2, RecordType: -1}, bpf.Egress, mode)
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			if got != mode {
				t.Fatalf("attached as %v, want %v", got, mode)
			}
			if mode == bpf.TCClsact && !strings.Contains(tcShow(t, p.A, "filter", "egress"), "walcast_tcimp") {
				t.Fatalf("no bpf filter on egress:\n%s", tcShow(t, p.A, "filter", "egress"))
			}
			a, b, other := listen(t, p.A, 0), listen(t, p.B, 9000), listen(t, p.B, 9001)
			if n := delivered(t, a, b, 20); n != 10 {
				t.Fatalf("every 2nd dropped: %d of 20 arrived, want 10", n)
			}
			if n := delivered(t, a, other, 5); n != 5 {
				t.Fatalf("other port: %d of 5 arrived", n)
			}
			if n := delivered(t, b, a, 5); n != 5 { // B's egress is not impaired
				t.Fatalf("B to A: %d of 5 arrived", n)
			}
			if err := p.A.Ping(p.B.Addr, pingWait); err != nil {
				t.Fatalf("ping through the injector: %v", err)
			}
			ctr, err := im.Counters()
			if err != nil || ctr != (bpf.ImpairCounters{Matched: 20, Candidates: 20, Dropped: 10}) {
				t.Fatalf("counters %+v %v", ctr, err)
			}
			if err := im.Close(); err != nil {
				t.Fatal(err)
			}
			if n := delivered(t, a, b, 5); n != 5 {
				t.Fatalf("after Close: %d of 5 arrived", n)
			}
			if s := tcShow(t, p.A, "qdisc"); strings.Contains(s, "clsact") {
				t.Fatalf("clsact qdisc left behind:\n%s", s)
			}
			if out, _ := p.A.Exec("ip", "-d", "link", "show", p.A.Link); bytes.Contains(out, []byte("tcx")) {
				t.Fatalf("tcx link left behind:\n%s", out)
			}
		})
	}
}

// TestTCImpairKeepsForeignClsact: a clsact qdisc that existed before the
// attachment (someone else's filters hang off it) survives Close, and a
// second injector on the same hook gets its own priority.
func TestTCImpairKeepsForeignClsact(t *testing.T) {
	p := New(t, DefaultConfig())
	if _, err := p.A.Exec("tc", "qdisc", "add", "dev", p.A.Link, "clsact"); err != nil {
		t.Fatal(err)
	}
	im1, _, err := p.A.AttachTCImpair(bpf.ImpairConfig{Port: 9000, RecordType: -1}, bpf.Egress, bpf.TCClsact)
	if err != nil {
		t.Fatal(err)
	}
	defer im1.Close()
	im2, _, err := p.A.AttachTCImpair(bpf.ImpairConfig{Port: 9000, DropFraction: 1, RecordType: -1}, bpf.Egress, bpf.TCClsact)
	if err != nil {
		t.Fatal(err)
	}
	defer im2.Close()
	a, b := listen(t, p.A, 0), listen(t, p.B, 9000)
	if n := delivered(t, a, b, 4); n != 0 {
		t.Fatalf("second injector drops all: %d of 4 arrived", n)
	}
	if err := im2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := delivered(t, a, b, 4); n != 4 {
		t.Fatalf("first injector alone drops none: %d of 4 arrived", n)
	}
	if err := im1.Close(); err != nil {
		t.Fatal(err)
	}
	if s := tcShow(t, p.A, "qdisc"); !strings.Contains(s, "clsact") {
		t.Fatalf("the pre-existing clsact qdisc was removed:\n%s", s)
	}
	if s := tcShow(t, p.A, "filter", "egress"); strings.Contains(s, "walcast") {
		t.Fatalf("filters left behind:\n%s", s)
	}
}

// TestLAN: three hosts on a bridge reach each other; an injector on the
// egress of the port facing host 1 loses only what goes to host 1
// (per-receiver loss), whoever sends it.
func TestLAN(t *testing.T) {
	c := DefaultLANConfig()
	c.Hosts, c.Tag = 3, "xdp"
	l := NewLAN(t, c)
	for i, h := range l.Hosts {
		if len(h.Link) > 15 || len(l.Ports[i].Link) > 15 || h.Index == 0 || l.Ports[i].Index == 0 {
			t.Fatalf("host %d: %+v port %+v", i, h, l.Ports[i])
		}
		if out, err := h.Exec("ethtool", "-k", h.Link); err != nil || !bytes.Contains(out, []byte("tx-udp-segmentation: off")) {
			t.Fatalf("host %d: UDP segmentation offload not off: %v\n%s", i, err, out)
		}
	}
	if err := l.Hosts[0].Ping(l.Hosts[2].Addr, pingWait); err != nil {
		t.Fatal(err)
	}
	im, _, err := l.Ports[1].AttachTCImpair(bpf.ImpairConfig{Port: 9000, DropFraction: 1, RecordType: -1}, bpf.Egress, bpf.TCAuto)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	s0, s2 := listen(t, l.Hosts[0], 0), listen(t, l.Hosts[2], 0)
	r1, r2 := listen(t, l.Hosts[1], 9000), listen(t, l.Hosts[2], 9000)
	for _, tc := range []struct {
		from, to *net.UDPConn
		want     int
		name     string
	}{{s0, r1, 0, "0→1"}, {s2, r1, 0, "2→1"}, {s0, r2, 6, "0→2"}} {
		if n := delivered(t, tc.from, tc.to, 6); n != tc.want {
			t.Errorf("%s: %d of 6 arrived, want %d", tc.name, n, tc.want)
		}
	}
	if ctr, err := im.Counters(); err != nil || ctr.Dropped != 12 {
		t.Fatalf("counters %+v %v, want 12 dropped", ctr, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range append([]string{l.Switch}, l.Hosts[0].NS, l.Hosts[2].NS) {
		if _, err := (Host{NS: ns}).Exec("true"); err == nil {
			t.Fatalf("namespace %s still exists", ns)
		}
	}
}

func TestLANConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod func(*LANConfig)
		ok  bool
	}{
		{func(*LANConfig) {}, true},
		{func(c *LANConfig) { c.Hosts = 1 }, false},
		{func(c *LANConfig) { c.Hosts = 17 }, false},
		{func(c *LANConfig) { c.Prefix = netip.PrefixFrom(c.Prefix.Addr(), 30) }, false},
		{func(c *LANConfig) { c.Tag = "a b" }, false},
		{func(c *LANConfig) { c.Queues = 0 }, false},
	} {
		c := DefaultLANConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
