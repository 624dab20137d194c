package netns

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/bpf"
)

// listen opens a UDP socket on h at port.
func listen(t *testing.T, h Host, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := h.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: h.Addr.AsSlice(), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// delivered sends n datagrams from a to b:port and counts what arrives
// within a short quiet period.
func delivered(t *testing.T, from *net.UDPConn, to *net.UDPConn, n int) int {
	t.Helper()
	dst := to.LocalAddr().(*net.UDPAddr)
	for i := range n {
		if _, err := from.WriteToUDP([]byte{1, 0, 0, 0, byte(i)}, dst); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	buf := make([]byte, 64)
	for {
		to.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, _, err := to.ReadFromUDP(buf); err != nil {
			return got
		}
		got++
	}
}

func TestPair(t *testing.T) {
	p := New(t, DefaultConfig())
	for _, h := range []Host{p.A, p.B} {
		if len(h.Link) > 15 || h.Index == 0 || len(h.MAC) != 6 {
			t.Fatalf("host %+v", h)
		}
		// One rx and one tx queue, so one AF_XDP socket sees everything.
		out, err := h.Exec("ls", "/sys/class/net/"+h.Link+"/queues")
		if err != nil {
			t.Fatal(err)
		}
		if q := strings.Fields(string(out)); len(q) != 2 || q[0] != "rx-0" || q[1] != "tx-0" {
			t.Fatalf("%s queues %q", h.Link, q)
		}
		// Static neighbour entry for the peer.
		out, err = h.Exec("cat", "/proc/net/arp")
		if err != nil {
			t.Fatal(err)
		}
		peer := p.B
		if h.NS == p.B.NS {
			peer = p.A
		}
		if !strings.Contains(string(out), peer.Addr.String()) || !strings.Contains(string(out), peer.MAC.String()) {
			t.Fatalf("%s /proc/net/arp lacks %s %s:\n%s", h.NS, peer.Addr, peer.MAC, out)
		}
	}
	if err := p.A.Ping(p.B.Addr, 2*time.Second); err != nil {
		t.Fatalf("ping A→B: %v", err)
	}
	if err := p.A.Ping(netip.MustParseAddr("10.199.0.77"), 300*time.Millisecond); err == nil {
		t.Fatal("ping to an absent address succeeded")
	}
	a, b := listen(t, p.A, 0), listen(t, p.B, 9000)
	if got := delivered(t, a, b, 3); got != 3 {
		t.Fatalf("UDP A→B: %d of 3 arrived", got)
	}
	// The host namespace does not see the links.
	if _, err := net.InterfaceByName(p.A.Link); err == nil {
		t.Fatalf("%s visible in the host namespace", p.A.Link)
	}
}

func TestDoRestoresNamespace(t *testing.T) {
	p := New(t, DefaultConfig())
	before, _ := os.Readlink("/proc/thread-self/ns/net")
	var inside string
	if err := p.A.Do(func() error {
		inside, _ = os.Readlink("/proc/thread-self/ns/net")
		_, err := net.InterfaceByName(p.A.Link)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside == before {
		t.Fatalf("Do ran in the caller's namespace %s", before)
	}
	want := errors.New("from f")
	if err := p.B.Do(func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Do returned %v", err)
	}
	// Many calls: threads handed back to the runtime are in the host
	// namespace again (otherwise a later goroutine would land in A).
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.A.Do(func() error { return nil })
		}()
	}
	wg.Wait()
	for range 50 {
		if _, err := net.InterfaceByName(p.A.Link); err == nil {
			t.Fatalf("%s visible from the host after Do", p.A.Link)
		}
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	Require(t)
	p, err := Create(DefaultConfig())
	if err != nil {
		p.Close()
		t.Fatal(err)
	}
	q, err := Create(DefaultConfig()) // a second pair at the same time: unique names
	if err != nil {
		p.Close()
		q.Close()
		t.Fatal(err)
	}
	if p.A.NS == q.A.NS || p.A.Link == q.A.Link {
		t.Fatalf("names collide: %s %s", p.A.NS, q.A.NS)
	}
	for _, x := range []*Pair{p, q} {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		for _, h := range []Host{x.A, x.B} {
			if _, err := os.Stat("/run/netns/" + h.NS); err == nil {
				t.Fatalf("%s still exists", h.NS)
			}
		}
	}
}

func TestGRO(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := DefaultConfig()
		c.GRO = on
		p := New(t, c)
		out, err := p.B.Exec("ethtool", "-k", p.B.Link)
		if err != nil {
			t.Fatal(err)
		}
		want := "generic-receive-offload: off"
		if on {
			want = "generic-receive-offload: on"
		}
		if !bytes.Contains(out, []byte(want)) {
			t.Fatalf("GRO=%v: ethtool -k lacks %q", on, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"same addr", func(c *Config) { c.AddrB = c.AddrA }, false},
		{"no queues", func(c *Config) { c.Queues = 0 }, false},
		{"tiny mtu", func(c *Config) { c.MTU = 10 }, false},
		{"zero addr", func(c *Config) { c.AddrA = netip.Prefix{} }, false},
	} {
		c := good
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestAttachImpair drops on B's ingress, then lifts the outage.
func TestAttachImpair(t *testing.T) {
	p := New(t, DefaultConfig())
	im, mode, err := p.B.AttachImpair(bpf.ImpairConfig{Port: 9000, DropFraction: 1, RecordType: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if mode != bpf.ModeNative {
		t.Errorf("veth attached in %v mode, want native", mode)
	}
	a, b, other := listen(t, p.A, 0), listen(t, p.B, 9000), listen(t, p.B, 9001)
	if got := delivered(t, a, b, 5); got != 0 {
		t.Fatalf("outage: %d of 5 arrived", got)
	}
	if got := delivered(t, a, other, 5); got != 5 {
		t.Fatalf("other port: %d of 5 arrived", got)
	}
	if err := p.A.Ping(p.B.Addr, 2*time.Second); err != nil {
		t.Fatalf("ping through impair: %v", err)
	}
	c, err := im.Counters()
	if err != nil || c.Dropped != 5 || c.Matched != 5 {
		t.Fatalf("counters %+v %v", c, err)
	}
	if err := im.Set(bpf.ImpairConfig{Port: 9000, RecordType: -1}); err != nil {
		t.Fatal(err)
	}
	if got := delivered(t, a, b, 5); got != 5 {
		t.Fatalf("after the outage: %d of 5 arrived", got)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := p.B.Exec("ip", "link", "show", p.B.Link)
	if err != nil || bytes.Contains(out, []byte("xdp")) {
		t.Fatalf("XDP still attached after Close: %s %v", out, err)
	}
}
