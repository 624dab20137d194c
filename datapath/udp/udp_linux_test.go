package udp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"golang.org/x/sys/unix"
)

func open(t *testing.T, c Config) *Path {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// recvN polls until n datagrams arrived or a second passed.
func recvN(t *testing.T, p *Path, n int) []string {
	t.Helper()
	v := batch.New(8, 2048)
	var got []string
	deadline := time.Now().Add(time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		k, err := p.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < k; i++ {
			m, _ := v.Msg(i)
			got = append(got, string(m))
		}
	}
	return got
}

func TestSendRecv(t *testing.T) {
	for _, connected := range []bool{false, true} {
		t.Run(fmt.Sprintf("connected=%v", connected), func(t *testing.T) {
			b := open(t, DefaultConfig())
			c := DefaultConfig()
			if connected {
				c.Peer = b.LocalAddr()
			}
			a := open(t, c)
			v := batch.New(16, 2048)
			for i := 0; i < 16; i++ {
				dst := b.LocalAddr()
				if connected {
					dst = netip.AddrPort{}
				}
				v.Append([]byte(fmt.Sprintf("m%02d", i)), dst)
			}
			if n, err := a.Send(v); n != 16 || err != nil {
				t.Fatal(n, err)
			}
			got := recvN(t, b, 16)
			if len(got) != 16 || got[0] != "m00" || got[15] != "m15" {
				t.Fatalf("got %v", got)
			}
			// The reply reaches a's connected socket with a's peer as source.
			r := batch.New(1, 64)
			r.Append([]byte("pong"), a.LocalAddr())
			if n, err := b.Send(r); n != 1 || err != nil {
				t.Fatal(n, err)
			}
			w := batch.New(4, 64)
			n, err := a.RecvWait(w, time.Now().Add(time.Second))
			if n != 1 || err != nil {
				t.Fatal(n, err)
			}
			if m, from := w.Msg(0); string(m) != "pong" || from != b.LocalAddr() {
				t.Fatalf("%q from %v", m, from)
			}
			if s := a.Stats(); s.Sent != 16 || s.Received != 1 {
				t.Fatalf("%+v", s)
			}
		})
	}
}

func TestPortInUse(t *testing.T) {
	a := open(t, DefaultConfig())
	c := DefaultConfig()
	c.Local = a.LocalAddr()
	_, err := New(c)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), a.LocalAddr().String()) {
		t.Fatalf("want EADDRINUSE naming %s, got %v", a.LocalAddr(), err)
	}
}

func TestRecvWaitDeadlineAndClose(t *testing.T) {
	a := open(t, DefaultConfig())
	v := batch.New(4, 64)
	start := time.Now()
	if n, err := a.RecvWait(v, time.Now().Add(20*time.Millisecond)); n != 0 || err != nil {
		t.Fatal(n, err)
	}
	if el := time.Since(start); el < 15*time.Millisecond {
		t.Fatalf("returned after %v", el)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.RecvWait(v, time.Time{})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	a.Close()
	select {
	case err := <-done:
		if !errors.Is(err, datapath.ErrClosed) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not wake RecvWait")
	}
	if _, err := a.Send(v); !errors.Is(err, datapath.ErrClosed) {
		t.Fatal(err)
	}
}

func TestSendErrnoStorm(t *testing.T) {
	b := open(t, DefaultConfig())
	c := DefaultConfig()
	c.Peer = b.LocalAddr()
	a := open(t, c)
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

func TestDeadPeer(t *testing.T) {
	b := open(t, DefaultConfig())
	c := DefaultConfig()
	c.Peer = b.LocalAddr()
	a := open(t, c)
	b.Close() // the peer disappears: ICMP port unreachable comes back
	v := batch.New(1, 64)
	v.Append([]byte("x"), netip.AddrPort{})
	r := batch.New(1, 64)
	for i := 0; i < 20; i++ {
		if _, err := a.Send(v); err != nil {
			t.Fatalf("send to a dead peer failed: %v", err)
		}
		if _, err := a.Recv(r); err != nil {
			t.Fatalf("recv after a dead peer failed: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if a.Stats().Refused == 0 {
		t.Fatal("ICMP errors not counted")
	}
}

func TestAllocs(t *testing.T) {
	b := open(t, DefaultConfig())
	c := DefaultConfig()
	c.Peer = b.LocalAddr()
	a := open(t, c)
	v := batch.New(16, 2048)
	for i := 0; i < 16; i++ {
		v.Append(make([]byte, 144), netip.AddrPort{})
	}
	r := batch.New(16, 2048)
	if n := testing.AllocsPerRun(200, func() {
		a.Send(v)
		for {
			if k, _ := b.Recv(r); k == 0 {
				break
			}
		}
		b.Recv(r) // empty poll
	}); n != 0 {
		t.Fatalf("%v allocs per send+recv", n)
	}
	// Parked receive: data ready at once, and a short deadline.
	if n := testing.AllocsPerRun(100, func() {
		a.Send(v)
		b.RecvWait(r, time.Now().Add(time.Millisecond))
	}); n != 0 {
		t.Fatalf("%v allocs per RecvWait", n)
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	c.Peer = netip.MustParseAddrPort("[::1]:9")
	if c.Validate() == nil {
		t.Fatal("mixed families accepted")
	}
}
