package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pair returns two bound non-blocking loopback sockets and rx's address.
func pair(t *testing.T, gro bool) (tx, rx int, dst netip.AddrPort) {
	t.Helper()
	var err error
	if rx, err = loopbackSocket(); err != nil {
		t.Fatal(err)
	}
	if tx, err = loopbackSocket(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(rx); unix.Close(tx) })
	for _, fd := range []int{rx, tx} {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
	}
	if gro {
		if err := unix.SetsockoptInt(rx, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
			t.Skipf("UDP_GRO: %v", err)
		}
	}
	sa, _ := unix.Getsockname(rx)
	return tx, rx, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*unix.SockaddrInet4).Port))
}

// frame writes a record-like message: 8-byte seq, then filler.
func frame(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq + uint64(i))
	}
}

func TestTxRxLoopback(t *testing.T) {
	cases := []struct {
		name      string
		gso, gro  bool
		coalesce  int
		size, n   int
		wantDgram int // datagrams the receiver should see without GRO (0 = n)
	}{
		{name: "plain", size: 144, n: 64},
		{name: "gso", gso: true, size: 144, n: 64},
		{name: "gso+gro", gso: true, gro: true, size: 144, n: 64},
		{name: "gso+gro-1443", gso: true, gro: true, size: 1443, n: 64},
		{name: "coalesce", coalesce: 1472, size: 144, n: 64, wantDgram: 7},
		{name: "coalesce+gso+gro", gso: true, gro: true, coalesce: 1472, size: 144, n: 64, wantDgram: 7},
		{name: "gro-only", gro: true, size: 100, n: 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.gso {
				if err := ProbeGSO(); err != nil {
					t.Skip(err)
				}
			}
			tx, rx, dst := pair(t, c.gro)
			v := New(c.n, 2048)
			for i := 0; i < c.n; i++ {
				b := v.Next()[:c.size]
				frame(b, uint64(i))
				v.Commit(c.size, dst)
			}
			ttx := NewTx(tx, 64, TxConfig{Family: unix.AF_INET, GSO: c.gso, Coalesce: c.coalesce})
			sent, e := ttx.Send(v)
			if e != 0 || sent != c.n {
				t.Fatalf("send %d %v", sent, e)
			}
			if c.gso && ttx.Supers() == 0 {
				t.Fatal("no GSO super-datagram sent")
			}
			want := c.wantDgram
			if want == 0 {
				want = c.n
			}
			rrx := NewRx(rx, 64, RxConfig{GRO: c.gro})
			got := New(16, 2048) // smaller than the burst: exercises GRO pending
			var stream []byte
			dgrams := 0
			deadline := time.Now().Add(2 * time.Second)
			for dgrams < want && time.Now().Before(deadline) {
				n, e := rrx.Recv(got)
				if e != 0 && e != unix.EAGAIN {
					t.Fatal(e)
				}
				for i := 0; i < n; i++ {
					m, from := got.Msg(i)
					if from.Port() == 0 {
						t.Fatalf("no source address")
					}
					stream = append(stream, m...)
				}
				dgrams += n
			}
			if dgrams != want {
				t.Fatalf("got %d datagrams, want %d", dgrams, want)
			}
			var exp []byte
			for i := 0; i < c.n; i++ {
				m, _ := v.Msg(i)
				exp = append(exp, m...)
			}
			if !bytes.Equal(stream, exp) {
				t.Fatalf("byte stream differs (%d vs %d bytes)", len(stream), len(exp))
			}
			if c.gso && c.gro && rrx.GROSegments() == 0 {
				t.Fatal("GRO on, GSO sent, but no coalesced datagram was split")
			}
			if rrx.Truncated() != 0 {
				t.Fatalf("truncated %d", rrx.Truncated())
			}
		})
	}
}

func TestSeamEIODisablesGSO(t *testing.T) {
	tx, rx, dst := pair(t, false)
	old := Sys
	t.Cleanup(func() { Sys = old })
	calls := 0
	Sys.Sendmmsg = func(fd int, hs []unix.Mmsghdr, flags int) (int, unix.Errno) {
		calls++
		for _, h := range hs {
			if h.Hdr.Controllen != 0 {
				return 0, unix.EIO // the kernel's answer when the device cannot checksum segments
			}
		}
		return old.Sendmmsg(fd, hs, flags)
	}
	v := New(8, 256)
	for i := 0; i < 8; i++ {
		v.Append(make([]byte, 100), dst)
	}
	ttx := NewTx(tx, 8, TxConfig{Family: unix.AF_INET, GSO: true})
	n, e := ttx.Send(v)
	if e != 0 || n != 8 || ttx.GSO() || !ttx.GSOTurnedOff() || calls != 2 {
		t.Fatalf("n=%d e=%v gso=%v off=%v calls=%d", n, e, ttx.GSO(), ttx.GSOTurnedOff(), calls)
	}
	// The messages arrived as 8 plain datagrams.
	r := NewRx(rx, 8, RxConfig{})
	got := New(8, 256)
	deadline := time.Now().Add(time.Second)
	total := 0
	for total < 8 && time.Now().Before(deadline) {
		k, _ := r.Recv(got)
		total += k
	}
	if total != 8 {
		t.Fatalf("received %d", total)
	}
}

func TestSeamShortSendAndErrors(t *testing.T) {
	tx, _, dst := pair(t, false)
	old := Sys
	t.Cleanup(func() { Sys = old })
	cases := []struct {
		name  string
		ret   int
		errno unix.Errno
		want  int
	}{
		{"short", 3, 0, 3},
		{"eagain", 0, unix.EAGAIN, 0},
		{"enobufs", 0, unix.ENOBUFS, 0},
		{"none", 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			Sys.Sendmmsg = func(int, []unix.Mmsghdr, int) (int, unix.Errno) { return c.ret, c.errno }
			v := New(8, 64)
			for i := 0; i < 8; i++ {
				v.Append([]byte("x"), dst)
			}
			ttx := NewTx(tx, 8, TxConfig{Family: unix.AF_INET})
			n, e := ttx.Send(v)
			if n != c.want || e != c.errno {
				t.Fatalf("n=%d e=%v", n, e)
			}
			if v.Len() != 8 {
				t.Fatal("Send modified the Vec")
			}
		})
	}
}

func TestTruncatedDropped(t *testing.T) {
	tx, rx, dst := pair(t, false)
	v := New(3, 512)
	v.Append(make([]byte, 10), dst)
	v.Append(make([]byte, 300), dst) // larger than the receiver's slot
	v.Append(make([]byte, 20), dst)
	if n, e := NewTx(tx, 3, TxConfig{Family: unix.AF_INET}).Send(v); n != 3 || e != 0 {
		t.Fatal(n, e)
	}
	r := NewRx(rx, 4, RxConfig{})
	got := New(4, 64)
	var lens []int
	deadline := time.Now().Add(time.Second)
	for len(lens) < 2 && time.Now().Before(deadline) {
		n, _ := r.Recv(got)
		for i := 0; i < n; i++ {
			m, _ := got.Msg(i)
			lens = append(lens, len(m))
		}
	}
	if len(lens) != 2 || lens[0] != 10 || lens[1] != 20 || r.Truncated() != 1 {
		t.Fatalf("lens %v truncated %d", lens, r.Truncated())
	}
}

func TestTxRxAllocs(t *testing.T) {
	for _, gro := range []bool{false, true} {
		tx, rx, dst := pair(t, gro)
		ttx := NewTx(tx, 32, TxConfig{Family: unix.AF_INET, GSO: ProbeGSO() == nil})
		rrx := NewRx(rx, 32, RxConfig{GRO: gro})
		v := New(32, 2048)
		got := New(32, 2048)
		p := make([]byte, 144)
		if n := testing.AllocsPerRun(200, func() {
			v.Reset()
			for !v.Full() {
				v.Append(p, dst)
			}
			ttx.Send(v)
			for {
				if n, _ := rrx.Recv(got); n == 0 {
					break
				}
			}
		}); n != 0 {
			t.Fatalf("gro=%v: %v allocs per send+drain", gro, n)
		}
	}
}

func TestSockaddrRoundTrip(t *testing.T) {
	for _, s := range []string{"127.0.0.1:9", "[::1]:65535", "[::ffff:10.1.2.3]:80"} {
		ap := netip.MustParseAddrPort(s)
		var sa unix.RawSockaddrInet6
		fam := unix.AF_INET6
		if PutSockaddr(&sa, fam, ap) == 0 {
			t.Fatal(s)
		}
		if got := ParseSockaddr(&sa); got.Addr() != ap.Addr().Unmap() || got.Port() != ap.Port() {
			t.Fatalf("%s -> %s", s, got)
		}
		if ap.Addr().Unmap().Is4() {
			if PutSockaddr(&sa, unix.AF_INET, ap) != unix.SizeofSockaddrInet4 {
				t.Fatal("v4 encode")
			}
			if got := ParseSockaddr(&sa); got.Addr() != ap.Addr().Unmap() {
				t.Fatalf("v4 %s", got)
			}
		} else if PutSockaddr(&sa, unix.AF_INET, ap) != 0 {
			t.Fatal("v6 address accepted on a v4 socket")
		}
	}
}

// TestGROViewsKeepPending: GRO segments are views of the Rx's private
// slots, valid until the next Recv. While segments of an earlier
// recvmmsg are pending, Recv hands out only those (a recvmmsg would
// overwrite the slots the Vec refers to), even with more datagrams ready
// on the socket; and views sent on by a Tx (AppendView) carry their
// bytes.
func TestGROViewsKeepPending(t *testing.T) {
	if err := ProbeGSO(); err != nil {
		t.Skip(err)
	}
	tx, rx, dst := pair(t, true)
	ttx := NewTx(tx, 64, TxConfig{Family: unix.AF_INET, GSO: true})
	ext := make([]byte, 64*144)
	burst := func(base uint64) {
		v := New(64, 2048)
		for i := range 64 {
			b := ext[i*144 : (i+1)*144]
			frame(b, base+uint64(i))
			v.AppendView(b, dst)
		}
		if n, e := ttx.Send(v); n != 64 || e != 0 {
			t.Fatalf("send %d %v", n, e)
		}
	}
	burst(0)
	rrx := NewRx(rx, 64, RxConfig{GRO: true})
	got := New(16, 2048)
	next := uint64(0)
	deadline := time.Now().Add(2 * time.Second)
	for next < 128 && time.Now().Before(deadline) {
		n, e := rrx.Recv(got)
		if e != 0 && e != unix.EAGAIN {
			t.Fatal(e)
		}
		if next == 16 {
			burst(64) // ready on the socket while 48 segments are pending
		}
		for i := range n {
			m, _ := got.Msg(i)
			if got.Owned(i) {
				t.Fatal("a GRO segment was copied into the Vec")
			}
			want := make([]byte, 144)
			frame(want, next)
			if !bytes.Equal(m, want) {
				t.Fatalf("segment %d: bytes differ", next)
			}
			next++
		}
	}
	if next != 128 {
		t.Fatalf("received %d segments, want 128", next)
	}
}

// TestTxJoinsAdjacentViews: messages that lie back to back in memory go
// to the kernel as one iovec (a GSO send of views of one buffer), others
// as one iovec each; the datagrams are the same either way.
func TestTxJoinsAdjacentViews(t *testing.T) {
	tx, _, dst := pair(t, false)
	old := Sys
	t.Cleanup(func() { Sys = old })
	var iovs []int
	var stream []byte
	Sys.Sendmmsg = func(_ int, hs []unix.Mmsghdr, _ int) (int, unix.Errno) {
		for _, h := range hs {
			iovs = append(iovs, int(h.Hdr.Iovlen))
			for _, iov := range unsafe.Slice(h.Hdr.Iov, h.Hdr.Iovlen) {
				stream = append(stream, unsafe.Slice(iov.Base, iov.Len)...)
			}
		}
		return len(hs), 0
	}
	buf := make([]byte, 10*100)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, tc := range []struct {
		name string
		fill func(v *Vec)
		want []int
	}{
		{"adjacent views", func(v *Vec) {
			for i := range 10 {
				v.AppendView(buf[i*100:(i+1)*100], dst)
			}
		}, []int{1}},
		{"a gap", func(v *Vec) {
			for i := range 10 {
				if i != 5 {
					v.AppendView(buf[i*100:(i+1)*100], dst)
				}
			}
		}, []int{2}},
		{"own slots", func(v *Vec) {
			for i := range 10 {
				v.Append(buf[i*100:(i+1)*100], dst)
			}
		}, []int{10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iovs, stream = nil, nil
			v := New(16, 2048)
			tc.fill(v)
			ttx := NewTx(tx, 16, TxConfig{Family: unix.AF_INET, GSO: true})
			if n, e := ttx.Send(v); n != v.Len() || e != 0 {
				t.Fatalf("send %d %v", n, e)
			}
			var exp []byte
			for i := range v.Len() {
				m, _ := v.Msg(i)
				exp = append(exp, m...)
			}
			if fmt.Sprint(iovs) != fmt.Sprint(tc.want) || !bytes.Equal(stream, exp) {
				t.Fatalf("iovecs per header %v, want %v; bytes equal %v", iovs, tc.want, bytes.Equal(stream, exp))
			}
		})
	}
}
