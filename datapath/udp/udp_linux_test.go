package udp

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/internal/pathtest"
	"golang.org/x/sys/unix"
)

var kit = pathtest.Kit{
	Open: func(local, peer netip.AddrPort) (pathtest.Path, error) {
		c := DefaultConfig()
		if local.IsValid() {
			c.Local = local
		}
		c.Peer = peer
		return New(c)
	},
	Counts: func(p pathtest.Path) pathtest.Counts {
		s := p.(*Path).Stats()
		return pathtest.Counts{Sent: s.Sent, Received: s.Received, Refused: s.Refused}
	},
	ReleasesWait: true,
}

// TestPath runs the tests every socket datapath shares.
func TestPath(t *testing.T) { kit.Run(t) }

func TestSendErrnoStorm(t *testing.T) {
	b := kit.Must(t, netip.AddrPort{}, netip.AddrPort{})
	a := kit.Must(t, netip.AddrPort{}, b.LocalAddr()).(*Path)
	old := batch.Sys
	t.Cleanup(func() { batch.Sys = old })
	cases := []struct {
		name    string
		errno   unix.Errno
		after   int // calls that succeed first
		want    int
		wantErr bool
	}{
		{"eagain", unix.EAGAIN, 3, 3, false},
		{"enobufs", unix.ENOBUFS, 0, 0, false},
		{"refused", unix.ECONNREFUSED, 0, 8, false},
		{"eperm", unix.EPERM, 2, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			batch.Sys.Sendto = func(fd int, p []byte, flags int, sa *unix.RawSockaddrInet6, salen uint32) (int, unix.Errno) {
				calls++
				if calls <= tc.after {
					return len(p), 0
				}
				return 0, tc.errno
			}
			v := batch.New(8, 64)
			for i := 0; i < 8; i++ {
				v.Append([]byte("x"), netip.AddrPort{})
			}
			n, err := a.Send(v)
			if n != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("n=%d err=%v", n, err)
			}
			if tc.wantErr && !errors.Is(err, syscall.EPERM) {
				t.Fatalf("error does not wrap EPERM: %v", err)
			}
		})
	}
	batch.Sys = old
	if s := a.Stats(); s.EAGAIN != 1 || s.ENOBUFS != 1 || s.Refused != 8 {
		t.Fatalf("%+v", s)
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	c.Peer = netip.MustParseAddrPort("[::1]:9")
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("mixed families: %v", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if s := (Config{BusyPollUS: -1}).sock(); s.BusyPollUS != 0 || s.SockBuf != 8<<20 {
		t.Fatalf("defaults not applied: %+v", s)
	}
}

// After a poll that found at most one datagram, Recv hands over the first
// datagram without a further recvfrom (light traffic: the next call would
// only say EAGAIN); the call after drains the rest in one batch.
func TestRecvLightTrafficReturnsFirstDatagram(t *testing.T) {
	b := kit.Must(t, netip.AddrPort{}, netip.AddrPort{}).(*Path)
	a := kit.Must(t, netip.AddrPort{}, b.LocalAddr()).(*Path)
	v := batch.New(8, 64)
	if n, err := b.Recv(v); n != 0 || err != nil { // nothing yet: EAGAIN
		t.Fatalf("empty Recv: %d, %v", n, err)
	}
	out := batch.New(3, 64)
	for i := 0; i < 3; i++ {
		out.Append([]byte{byte(i), 1, 2, 3, 4, 5, 6, 7}, netip.AddrPort{})
	}
	if n, err := a.Send(out); n != 3 || err != nil {
		t.Fatalf("Send: %d, %v", n, err)
	}
	calls0 := b.Stats().RecvCalls
	got := 0
	for spins := 0; got == 0; spins++ {
		n, err := b.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		got = n
		if spins > 1e6 {
			t.Fatal("datagrams never arrived")
		}
	}
	if got != 1 {
		t.Fatalf("light-traffic Recv returned %d datagrams, want the first alone", got)
	}
	if m, _ := v.Msg(0); m[0] != 0 {
		t.Fatalf("first datagram %v", m)
	}
	calls := b.Stats().RecvCalls - calls0
	n, err := b.Recv(v)
	if err != nil || n != 2 {
		t.Fatalf("next Recv: %d, %v; want the 2 left in one call", n, err)
	}
	t.Logf("recvfrom calls for the first datagram (EAGAIN polls included): %d", calls)
}
