package xdp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/internal/netns"
)

// TestCopyModeTxSkipsEgressHook pins down the kernel fact the LAN
// topology exists for: AF_XDP copy-mode transmit (__dev_direct_xmit)
// bypasses the sending interface's tc egress hook, so an injector there
// never sees an XDP sender's frames, while it does see the kernel's.
func TestCopyModeTxSkipsEgressHook(t *testing.T) {
	pr := newPair(t)
	im, _, err := pr.A.AttachTCImpair(bpf.ImpairConfig{DropFraction: 1, RecordType: -1}, bpf.Egress, bpf.TCAuto)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	rcv := kernelUDP(t, pr.B, kernelPort)
	p := open(t, pr.A, netip.AddrPortFrom(pr.B.Addr, kernelPort), nil)
	sendAll(t, p, [][]byte{payload(1, 64), payload(2, 64)}, netip.AddrPort{})
	buf := make([]byte, 2048)
	for i := range 2 {
		rcv.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, _, err := rcv.ReadFromUDPAddrPort(buf); err != nil {
			t.Fatalf("AF_XDP datagram %d did not arrive (was it dropped on egress? then the kernel changed): %v", i, err)
		}
	}
	if c, _ := im.Counters(); c.Matched != 0 {
		t.Fatalf("egress injector saw %d AF_XDP frames; docs/xdp.md says it cannot", c.Matched)
	}
}

// TestLANEgressImpairsXDP: on a LAN, the injector on each switch port's
// egress drops AF_XDP traffic in both directions, exactly as configured.
func TestLANEgressImpairsXDP(t *testing.T) {
	c := netns.DefaultLANConfig()
	c.Tag = "xdp"
	l := netns.NewLAN(t, c)
	h0, h1 := l.Hosts[0], l.Hosts[1]
	var ims [2]*bpf.TCImpair
	for i := range ims {
		im, _, err := l.Ports[i].AttachTCImpair(bpf.ImpairConfig{Port: xdpPort, EveryNth: 2, RecordType: -1}, bpf.Egress, bpf.TCAuto)
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		ims[i] = im
	}
	p0 := open(t, h0, netip.AddrPortFrom(h1.Addr, xdpPort), nil)
	p1 := open(t, h1, netip.AddrPortFrom(h0.Addr, xdpPort), nil)
	for _, d := range []struct {
		from, to *Path
		im       *bpf.TCImpair
		name     string
	}{{p0, p1, ims[1], "0→1"}, {p1, p0, ims[0], "1→0"}} {
		var msgs [][]byte
		for i := range 20 {
			msgs = append(msgs, payload(i, 100))
		}
		sendAll(t, d.from, msgs, netip.AddrPort{})
		got, _ := recvN(t, d.to, 10)
		if len(got) != 10 {
			ctr, _ := d.im.Counters()
			t.Fatalf("%s: %d of 20 arrived, want 10 (every 2nd dropped); injector %+v; sender %+v; receiver %+v", d.name, len(got), ctr, d.from.Stats(), d.to.Stats())
		}
		if got, _ := recvN(t, d.to, 1); len(got) != 0 {
			t.Fatalf("%s: more than 10 of 20 arrived", d.name)
		}
		if ctr, err := d.im.Counters(); err != nil || ctr.Matched != 20 || ctr.Dropped != 10 {
			t.Fatalf("%s: injector counters %+v %v", d.name, ctr, err)
		}
	}
}
