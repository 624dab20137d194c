package stdnet

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/internal/pathtest"
)

var kit = pathtest.Kit{
	Open: func(local, peer netip.AddrPort) (pathtest.Path, error) {
		if !local.IsValid() {
			local = netip.MustParseAddrPort("127.0.0.1:0")
		}
		return Listen(Config{Local: local, Peer: peer})
	},
	Counts: func(p pathtest.Path) pathtest.Counts {
		s := p.(*Path).Stats()
		return pathtest.Counts{Sent: s.Sent, Received: s.Received, Refused: s.Refused}
	},
}

// TestPath runs the tests every socket datapath shares.
func TestPath(t *testing.T) { kit.Run(t) }

// TestQueueFull: datagrams that arrive while the queue is full are
// dropped and counted, and the queue works again once drained.
func TestQueueFull(t *testing.T) {
	b, err := Listen(Config{Local: netip.MustParseAddrPort("127.0.0.1:0"), Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a := kit.Must(t, netip.AddrPort{}, b.LocalAddr())
	v := batch.New(16, 64)
	for range 16 {
		v.Append([]byte("x"), netip.AddrPort{})
	}
	if n, err := a.Send(v); n != 16 || err != nil {
		t.Fatal(n, err)
	}
	// The reader has taken all 16 from the socket once it dropped 12: the
	// queue holds 4. (Draining before then lets the reader queue more.)
	waitDropped := func(n uint64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); b.Stats().Dropped < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%+v", b.Stats())
			}
		}
	}
	waitDropped(12)
	r := batch.New(16, 64)
	if n, _ := b.Recv(r); n != 4 {
		t.Fatalf("%d queued, want 4", n)
	}
	if n, err := a.Send(v); n != 16 || err != nil {
		t.Fatal(n, err)
	}
	waitDropped(24)
	if got := pathtest.Recv(t, b, 4); len(got) != 4 {
		t.Fatalf("%d after draining, want 4", len(got))
	}
}

// TestPacketConn: New wraps any net.PacketConn.
func TestPacketConn(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(struct{ net.PacketConn }{pc}, Config{}) // hides the *net.UDPConn: the generic path
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	q := kit.Must(t, netip.AddrPort{}, netip.AddrPort{})
	v := batch.New(1, 64)
	v.Append([]byte("hello"), q.LocalAddr())
	if n, err := p.Send(v); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if got := pathtest.Recv(t, q, 1); len(got) != 1 || got[0] != "hello" {
		t.Fatalf("%q", got)
	}
	if _, err := New(pc, Config{Slots: -1}); !errors.Is(err, ErrConfig) {
		t.Fatal(err)
	}
}
