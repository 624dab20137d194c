package sock

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/netns"
	"golang.org/x/sys/unix"
)

// openIn opens a socket inside host h's namespace.
func openIn(t *testing.T, h netns.Host, c Config) *Socket {
	t.Helper()
	var s *Socket
	if err := h.Do(func() error {
		var err error
		s, err = Open(c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sendTo(t *testing.T, s *Socket, to netip.AddrPort, b []byte) {
	t.Helper()
	var sa unix.RawSockaddrInet6
	n := batch.PutSockaddr(&sa, s.Family, to)
	if _, e := batch.Sys.Sendto(s.FD, b, 0, &sa, n); e != 0 {
		t.Fatalf("sendto %v: %v", to, e)
	}
}

// recvAll reads what arrives at s until it has been quiet for quiet.
func recvAll(s *Socket, quiet time.Duration) []string {
	var got []string
	buf := make([]byte, 2048)
	deadline := time.Now().Add(quiet)
	for time.Now().Before(deadline) {
		n, e := batch.Sys.Recvfrom(s.FD, buf, 0, nil, nil)
		if e == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		if e != 0 {
			return append(got, "error: "+e.Error())
		}
		got = append(got, string(buf[:n]))
		deadline = time.Now().Add(quiet)
	}
	return got
}

func TestMulticastBridge(t *testing.T) {
	c := netns.DefaultLANConfig()
	c.Hosts, c.Tag = 4, "mc"
	c.Prefix6 = netip.MustParsePrefix("fd00:199:1::/64")
	b := netns.NewLAN(t, c)
	for _, v6 := range []bool{false, true} {
		name := "ipv4"
		group := netip.MustParseAddr("239.198.0.1")
		other := netip.MustParseAddr("239.198.0.9")
		any := netip.IPv4Unspecified()
		src := func(i int) netip.Addr { return b.Hosts[i].Addr }
		if v6 {
			name = "ipv6"
			group = netip.MustParseAddr("ff15::198:1")
			other = netip.MustParseAddr("ff15::198:9")
			any = netip.IPv6Unspecified()
			src = func(i int) netip.Addr { return b.Hosts[i].Addr6 }
		}
		t.Run(name, func(t *testing.T) {
			// Two receivers share host 1 (SO_REUSEADDR) and each gets every
			// datagram; host 2 receives the group only from host 0 (source
			// filter) and the other group from anyone; host 3 joins only the
			// other group.
			snd := openIn(t, b.Hosts[0], Config{Local: netip.AddrPortFrom(any, 0),
				Multicast: datapath.Multicast{Iface: b.Hosts[0].Link, TTL: 1}})
			port := uint16(0)
			r1 := openIn(t, b.Hosts[1], Config{Local: netip.AddrPortFrom(any, port),
				Multicast: datapath.Multicast{Iface: b.Hosts[1].Link, Groups: []netip.Addr{group}}})
			port = r1.Local.Port()
			r1b := openIn(t, b.Hosts[1], Config{Local: netip.AddrPortFrom(any, port),
				Multicast: datapath.Multicast{Iface: b.Hosts[1].Link, Groups: []netip.Addr{group}}})
			// Same host and port as r1, another group: IP_MULTICAST_ALL off
			// keeps r1's group away from it.
			r1c := openIn(t, b.Hosts[1], Config{Local: netip.AddrPortFrom(any, port),
				Multicast: datapath.Multicast{Iface: b.Hosts[1].Link, Groups: []netip.Addr{other}}})
			r2 := openIn(t, b.Hosts[2], Config{Local: netip.AddrPortFrom(any, port),
				Multicast: datapath.Multicast{Iface: b.Hosts[2].Link, Groups: []netip.Addr{group}, Sources: []netip.Addr{src(0)},
					AnySource: []netip.Addr{other}}})
			r3 := openIn(t, b.Hosts[3], Config{Local: netip.AddrPortFrom(any, port),
				Multicast: datapath.Multicast{Iface: b.Hosts[3].Link, Groups: []netip.Addr{other}}})
			// A stranger on host 3 sends to the group too: the source
			// filter on host 2 must drop it.
			stranger := openIn(t, b.Hosts[3], Config{Local: netip.AddrPortFrom(any, 0),
				Multicast: datapath.Multicast{Iface: b.Hosts[3].Link}})
			time.Sleep(50 * time.Millisecond) // let MLD/IGMP settle (snooping is off; this is only for the kernel's own state)
			to := netip.AddrPortFrom(group, port)
			sendTo(t, snd, to, []byte("a"))
			sendTo(t, snd, to, []byte("b"))
			sendTo(t, stranger, to, []byte("x"))
			// Host 2's second group is joined from any source.
			sendTo(t, stranger, netip.AddrPortFrom(other, port), []byte("y"))
			want := map[*Socket]string{r1: "abx", r1b: "abx", r1c: "y", r2: "aby", r3: "y"}
			for s, w := range want {
				got := ""
				for _, d := range recvAll(s, 200*time.Millisecond) {
					got += d
				}
				if !sameSet(got, w) {
					t.Errorf("receiver %v got %q, want %q", s.Local, got, w)
				}
			}
		})
	}
}

func sameSet(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[rune]int{}
	for _, r := range a {
		count[r]++
	}
	for _, r := range b {
		count[r]--
	}
	for _, c := range count {
		if c != 0 {
			return false
		}
	}
	return true
}

func TestMulticastErrors(t *testing.T) {
	v4 := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	cases := []struct {
		name string
		c    Config
		want string
	}{
		{"unicast group", Config{Local: v4, Multicast: datapath.Multicast{Groups: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}}, "not a multicast address"},
		{"family mismatch", Config{Local: v4, Multicast: datapath.Multicast{Groups: []netip.Addr{netip.MustParseAddr("ff15::1")}}}, "not IPv4"},
		{"sources without group", Config{Local: v4, Multicast: datapath.Multicast{Sources: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}}, "without a group"},
		{"multicast source", Config{Local: v4, Multicast: datapath.Multicast{Groups: []netip.Addr{netip.MustParseAddr("239.1.1.1")}, Sources: []netip.Addr{netip.MustParseAddr("239.1.1.2")}}}, "must be a unicast"},
		{"ttl", Config{Local: v4, Multicast: datapath.Multicast{TTL: 256}}, "TTL 256"},
		{"no such interface", Config{Local: v4, Multicast: datapath.Multicast{Iface: "mcnosuch0"}}, `interface "mcnosuch0"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(c.c)
			if err == nil {
				s.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
		})
	}
	t.Run("not multicast", func(t *testing.T) {
		_, err := Open(Config{Local: v4, Multicast: datapath.Multicast{Groups: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}})
		if !errors.Is(err, datapath.ErrNotMulticast) {
			t.Fatalf("%v does not wrap ErrNotMulticast", err)
		}
	})
}

// TestMulticastGSO sends runs of equal frames to a group as UDP GSO
// super-datagrams (what datapath/mmsg does) and checks that each member,
// with and without UDP_GRO, gets every segment as its own datagram.
func TestMulticastGSO(t *testing.T) {
	if err := batch.ProbeGSO(); err != nil {
		t.Skipf("UDP GSO: %v", err)
	}
	c := netns.DefaultLANConfig()
	c.Hosts, c.Tag = 3, "mc"
	b := netns.NewLAN(t, c)
	group := netip.MustParseAddr("239.198.0.7")
	any := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	snd := openIn(t, b.Hosts[0], Config{Local: any, Multicast: datapath.Multicast{Iface: b.Hosts[0].Link}})
	plain := openIn(t, b.Hosts[1], Config{Local: any, SockBuf: 4 << 20,
		Multicast: datapath.Multicast{Iface: b.Hosts[1].Link, Groups: []netip.Addr{group}}})
	port := plain.Local.Port()
	gro := openIn(t, b.Hosts[2], Config{Local: netip.AddrPortFrom(netip.IPv4Unspecified(), port), SockBuf: 4 << 20, GRO: true,
		Multicast: datapath.Multicast{Iface: b.Hosts[2].Link, Groups: []netip.Addr{group}}})
	const n = 48
	v := batch.New(n, 256)
	to := netip.AddrPortFrom(group, port)
	for i := range n {
		m := make([]byte, 144)
		m[0] = byte(i)
		v.Append(m, to)
	}
	tx := batch.NewTx(snd.FD, n, batch.TxConfig{Family: snd.Family, GSO: true})
	for sent := 0; sent < n; {
		k, e := tx.SendRange(v, sent)
		if e != 0 && e != unix.EAGAIN {
			t.Fatalf("send: %v", e)
		}
		sent += k
	}
	if tx.Supers() == 0 || tx.GSOTurnedOff() {
		t.Fatalf("no GSO super-datagram sent (supers %d, off %v)", tx.Supers(), tx.GSOTurnedOff())
	}
	for _, r := range []*Socket{plain, gro} {
		rx := batch.NewRx(r.FD, 64, batch.RxConfig{GRO: r.GRO})
		got := map[byte]bool{}
		rv := batch.New(64, 2048)
		deadline := time.Now().Add(2 * time.Second)
		for len(got) < n && time.Now().Before(deadline) {
			k, e := rx.Recv(rv)
			if e != 0 && e != unix.EAGAIN {
				t.Fatalf("recv: %v", e)
			}
			for i := range k {
				m, _ := rv.Msg(i)
				if len(m) != 144 {
					t.Fatalf("GRO %v: datagram of %d bytes", r.GRO, len(m))
				}
				got[m[0]] = true
			}
			if k == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if len(got) != n {
			t.Errorf("GRO %v: %d of %d datagrams", r.GRO, len(got), n)
		}
	}
}
