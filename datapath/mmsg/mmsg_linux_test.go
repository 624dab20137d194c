package mmsg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/internal/pathtest"
	"golang.org/x/sys/unix"
)

// kit opens paths from DefaultConfig (GSO and GRO on where the kernel
// has them) with gro set as given.
func kit(gro bool) pathtest.Kit {
	return pathtest.Kit{
		Open: func(local, peer netip.AddrPort) (pathtest.Path, error) {
			c := DefaultConfig()
			if local.IsValid() {
				c.Local = local
			}
			c.Peer, c.NoGRO = peer, !gro
			return New(c)
		},
		Counts: func(p pathtest.Path) pathtest.Counts {
			s := p.(*Path).Stats()
			return pathtest.Counts{Sent: s.Sent, Received: s.Received, Refused: s.Refused}
		},
		ReleasesWait: true,
	}
}

// TestPath runs the tests every socket datapath shares, and the
// allocation test again without GRO.
func TestPath(t *testing.T) {
	kit(true).Run(t)
	t.Run("Allocs/gro=false", kit(false).TestAllocs)
}

func open(t *testing.T, c Config) *Path {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// drain receives until want bytes arrived or a second passed; it returns
// the concatenated stream and the datagram count.
func drain(t *testing.T, p pathtest.Path, want int) ([]byte, int) {
	t.Helper()
	v := batch.New(32, 2048)
	var stream []byte
	dgrams := 0
	deadline := time.Now().Add(2 * time.Second)
	for len(stream) < want && time.Now().Before(deadline) {
		n, err := p.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			m, _ := v.Msg(i)
			stream = append(stream, m...)
		}
		dgrams += n
	}
	return stream, dgrams
}

func TestSendRecv(t *testing.T) {
	cases := []struct {
		name          string
		gso, gro, coa bool
		size, n       int
		wantDgrams    int
	}{
		{name: "plain", size: 144, n: 200, wantDgrams: 200},
		{name: "gso+gro", gso: true, gro: true, size: 144, n: 200, wantDgrams: 200},
		{name: "gso+gro-1443", gso: true, gro: true, size: 1443, n: 200, wantDgrams: 200},
		{name: "gso-only", gso: true, size: 144, n: 200, wantDgrams: 200},
		{name: "coalesce", coa: true, size: 144, n: 200, wantDgrams: 22}, // 10 frames per 1472-byte datagram, 64 frames (7 datagrams) per call: 200 = 3×64+8
		{name: "coalesce+gso+gro", coa: true, gso: true, gro: true, size: 144, n: 200, wantDgrams: 22},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.gso && batch.ProbeGSO() != nil {
				t.Skip(batch.ProbeGSO())
			}
			rc := DefaultConfig()
			rc.NoGRO = !c.gro
			b := open(t, rc)
			sc := DefaultConfig()
			sc.NoGSO, sc.Coalesce, sc.Peer = !c.gso, c.coa, b.LocalAddr()
			a := open(t, sc)
			if f := a.Features(); f.GSO != c.gso {
				t.Fatalf("features %+v", f)
			}
			v := batch.New(c.n, 2048) // more than Batch (64): several sendmmsg calls
			var want []byte
			for i := 0; i < c.n; i++ {
				buf := v.Next()[:c.size]
				binary.LittleEndian.PutUint64(buf, uint64(i))
				for j := 8; j < c.size; j++ {
					buf[j] = byte(i + j)
				}
				v.Commit(c.size, netip.AddrPort{})
				want = append(want, buf...)
			}
			sent := 0
			for sent < c.n {
				w := batch.New(c.n-sent, 2048)
				for i := sent; i < c.n; i++ {
					m, a := v.Msg(i)
					w.Append(m, a)
				}
				n, err := a.Send(w)
				if err != nil {
					t.Fatal(err)
				}
				sent += n
				if n == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			got, dgrams := drain(t, b, len(want))
			if !bytes.Equal(got, want) {
				t.Fatalf("stream differs: %d of %d bytes", len(got), len(want))
			}
			if dgrams != c.wantDgrams {
				t.Fatalf("%d datagrams, want %d", dgrams, c.wantDgrams)
			}
			s, r := a.Stats(), b.Stats()
			if c.gso && s.GSOSupers == 0 {
				t.Fatal("no GSO super-datagrams")
			}
			if c.gso && c.gro && r.GROSegments == 0 {
				t.Fatal("no GRO segments")
			}
			if r.Truncated != 0 || r.KernelDrops != 0 {
				t.Fatalf("receiver %+v", r)
			}
		})
	}
}

func TestErrnoStorm(t *testing.T) {
	b := kit(true).Must(t, netip.AddrPort{}, netip.AddrPort{})
	a := kit(true).Must(t, netip.AddrPort{}, b.LocalAddr()).(*Path)
	old := batch.Sys
	t.Cleanup(func() { batch.Sys = old })
	cases := []struct {
		errno   unix.Errno
		short   int // sendmmsg returns this many first
		want    int
		wantErr bool
	}{
		{unix.EAGAIN, 0, 0, false},
		{unix.ENOBUFS, 0, 0, false},
		{unix.EAGAIN, 5, 5, false},
		{unix.ECONNREFUSED, 0, 10, false},
		{unix.EINVAL, 0, 0, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v/%d", tc.errno, tc.short), func(t *testing.T) {
			first := true
			batch.Sys.Sendmmsg = func(fd int, hs []unix.Mmsghdr, flags int) (int, unix.Errno) {
				if first && tc.short > 0 {
					first = false
					return tc.short, 0
				}
				return 0, tc.errno
			}
			a.DisableGSO() // one header per message, so a short count maps 1:1
			v := batch.New(10, 64)
			for i := 0; i < 10; i++ {
				v.Append([]byte("x"), netip.AddrPort{})
			}
			n, err := a.Send(v)
			if n != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("n=%d err=%v", n, err)
			}
		})
	}
	batch.Sys = old
	s := a.Stats()
	if s.EAGAIN != 2 || s.ENOBUFS != 1 || s.Refused != 2 {
		t.Fatalf("%+v", s)
	}
}

func TestGSOEIOFallsBack(t *testing.T) {
	if batch.ProbeGSO() != nil {
		t.Skip(batch.ProbeGSO())
	}
	b := kit(true).Must(t, netip.AddrPort{}, netip.AddrPort{})
	a := kit(true).Must(t, netip.AddrPort{}, b.LocalAddr()).(*Path)
	old := batch.Sys
	t.Cleanup(func() { batch.Sys = old })
	batch.Sys.Sendmmsg = func(fd int, hs []unix.Mmsghdr, flags int) (int, unix.Errno) {
		for _, h := range hs {
			if h.Hdr.Controllen != 0 {
				return 0, unix.EIO // no TX checksum offload
			}
		}
		return old.Sendmmsg(fd, hs, flags)
	}
	v := batch.New(32, 256)
	for i := 0; i < 32; i++ {
		v.Append(bytes.Repeat([]byte{byte(i)}, 100), netip.AddrPort{})
	}
	if n, err := a.Send(v); n != 32 || err != nil {
		t.Fatal(n, err)
	}
	if f := a.Features(); f.GSO || !a.Stats().GSOTurnedOff {
		t.Fatalf("GSO still on: %+v", f)
	}
	if _, d := drain(t, b, 3200); d != 32 {
		t.Fatalf("%d datagrams", d)
	}
}

func TestValidate(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.Batch = -1 },
		func(c *Config) { c.Batch = 2000 },
		func(c *Config) { c.Coalesce, c.MaxDatagram = true, 10 },
		func(c *Config) { c.GROSlots = -1 },
		func(c *Config) { c.SockBuf = -1 },
		func(c *Config) { c.Peer = netip.MustParseAddrPort("[::1]:9") },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	// The zero Config is the defaults (but for the loopback address).
	z := Config{Local: DefaultConfig().Local}.withDefaults()
	z.BusyPollUS = DefaultConfig().BusyPollUS // mapped by the socket: 0 means 50 µs there
	if !reflect.DeepEqual(z, DefaultConfig()) {
		t.Fatalf("zero config %+v, want %+v", z, DefaultConfig())
	}
}
