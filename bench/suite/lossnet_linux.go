package suite

import (
	"fmt"
	"net/netip"

	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/internal/netns"
)

// lossNet is where the loss-degradation rows run: two network namespaces
// joined by a veth pair, with the BPF loss injector (bpf.TCImpair) on the
// egress of each end. Every IPv4/UDP datagram crossing the link, whoever
// sent it (raw UDP, MoldUDP64, KCP, QUIC, stop-and-wait, casting), is
// dropped with the same probability in each direction: the same loss for
// every peer, in the kernel, instead of each peer's own receive path
// discarding what it read. The injector matches UDP only, so TCP crosses
// the link unharmed; a second injector loaded for TCP
// (bpf.ImpairConfig.TCP) sits beside it and drops TCP segments alike, with
// TSO/GSO off on the link so a drop loses one segment, as on a wire.
type lossNet struct {
	pair *netns.Pair
	im   [2]*bpf.TCImpair // UDP: im[0] on A's end (A→B), im[1] on B's (B→A)
	tcp  [2]*bpf.TCImpair // TCP, the same (ImpairConfig.TCP)
	mode bpf.TCMode
}

// lossNetTag goes into the namespace names (walcast-suite-…).
const lossNetTag = "suite"

// newLossNet builds the link with nothing dropped yet. It needs root,
// ip(8) and tc BPF; the error says which is missing.
func newLossNet() (*lossNet, error) {
	c := netns.DefaultConfig()
	c.Tag = lossNetTag
	pr, err := netns.Create(c)
	if err != nil {
		if pr != nil {
			pr.Close()
		}
		return nil, err
	}
	n := &lossNet{pair: pr}
	for i, h := range []netns.Host{pr.A, pr.B} {
		im, mode, err := h.AttachTCImpair(bpf.ImpairConfig{RecordType: -1}, bpf.Egress, bpf.TCAuto)
		if err != nil {
			n.close()
			return nil, fmt.Errorf("tc loss injector on %s: %w", h.Link, err)
		}
		n.im[i], n.mode = im, mode
		if _, err := h.Exec("ethtool", "-K", h.Link, "tso", "off", "gso", "off"); err != nil {
			continue // TCP keeps super-segments: no TCP injector
		}
		if tcp, _, err := h.AttachTCImpair(bpf.ImpairConfig{RecordType: -1, TCP: true}, bpf.Egress, mode); err == nil {
			n.tcp[i] = tcp
		}
	}
	return n, nil
}

// tcpLoss says both directions drop TCP too.
func (n *lossNet) tcpLoss() bool { return n.tcp[0] != nil && n.tcp[1] != nil }

// set makes each direction drop the fraction drop of its datagrams.
func (n *lossNet) set(drop float64) error {
	for i := range n.im {
		if err := n.im[i].Set(bpf.ImpairConfig{DropFraction: drop, RecordType: -1}); err != nil {
			return err
		}
		if n.tcp[i] != nil {
			if err := n.tcp[i].Set(bpf.ImpairConfig{DropFraction: drop, RecordType: -1, TCP: true}); err != nil {
				return err
			}
		}
	}
	return nil
}

// counters are the injectors' counts so far, UDP and TCP together: A→B
// and B→A.
func (n *lossNet) counters() (ab, ba bpf.ImpairCounters) {
	sum := func(i int) bpf.ImpairCounters {
		c, _ := n.im[i].Counters()
		if n.tcp[i] != nil {
			t, _ := n.tcp[i].Counters()
			c.Matched, c.Candidates, c.Dropped = c.Matched+t.Matched, c.Candidates+t.Candidates, c.Dropped+t.Dropped
		}
		return c
	}
	return sum(0), sum(1)
}

// injected says what the injectors did between two counts, per direction.
func (n *lossNet) injected(ab0, ba0 bpf.ImpairCounters) string {
	ab, ba := n.counters()
	f := func(a, b bpf.ImpairCounters) string {
		m, d := a.Matched-b.Matched, a.Dropped-b.Dropped
		if m == 0 {
			return "0 packets"
		}
		return fmt.Sprintf("%.1f %% of %d", 100*float64(d)/float64(m), m)
	}
	what := "UDP"
	if n.tcpLoss() {
		what = "UDP+TCP"
	}
	return fmt.Sprintf("BPF tc injector (%s) on the veth (%v): dropped A→B %s, B→A %s", what, n.mode, f(ab, ab0), f(ba, ba0))
}

// peersNet places a peer's ends on the link.
func (n *lossNet) peersNet() *peers.Net {
	return &peers.Net{A: n.pair.A.Addr, B: n.pair.B.Addr, InA: n.pair.A.Do, InB: n.pair.B.Do, TCPLoss: n.tcpLoss()}
}

// udpPaths opens two datapath/udp paths connected across the link, A's
// in A's namespace and B's in B's.
func (n *lossNet) udpPaths() (a, b *udp.Path, err error) {
	open := func(h netns.Host, local, peer netip.AddrPort) (p *udp.Path, err error) {
		err = h.Do(func() error {
			c := udp.DefaultConfig()
			c.Local, c.Peer = local, peer
			p, err = udp.New(c)
			return err
		})
		return p, err
	}
	// B first on a kernel-chosen port; A sends to it; B reopened on the
	// same port, connected back to A.
	b, err = open(n.pair.B, netip.AddrPortFrom(n.pair.B.Addr, 0), netip.AddrPort{})
	if err != nil {
		return nil, nil, err
	}
	bl := b.LocalAddr()
	if a, err = open(n.pair.A, netip.AddrPortFrom(n.pair.A.Addr, 0), bl); err != nil {
		b.Close()
		return nil, nil, err
	}
	b.Close()
	if b, err = open(n.pair.B, bl, a.LocalAddr()); err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

func (n *lossNet) close() error {
	for _, im := range append(n.im[:], n.tcp[:]...) {
		if im != nil {
			im.Close()
		}
	}
	return n.pair.Close()
}
