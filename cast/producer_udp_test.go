package cast

import (
	"context"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"
)

// TestProducerCloseSendsOverUDP: Close right after Publish, over a real
// loopback socket, 1,000 times: every record Publish accepted is in the
// receiving socket when Close returns, once, in seq order. The receiver
// is a plain net.UDPConn (nothing of walcast's receive side), whose
// buffer holds a whole cycle, so loopback drops nothing and a missing
// record can only be one the producer never sent.
func TestProducerCloseSendsOverUDP(t *testing.T) {
	cycles := closeCycles()
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if err := rx.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	rng := rand.New(rand.NewPCG(3, 4))
	payload := make([]byte, 64)
	buf := make([]byte, 65536)
	ctx := context.Background()
	for i := range cycles {
		p, err := NewProducer(ProducerConfig{To: to, Local: loopback, Idle: quiet, PublishSlots: 64, KeepGOMAXPROCS: true, Sender: smallRing})
		if err != nil {
			t.Fatal(err)
		}
		from := p.Addr()
		n := 1 + rng.IntN(300) // up to ~5 publish queues' worth
		for range n {
			if err := p.Publish(ctx, 100, payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", i, err)
		}
		// Everything sent is queued on rx by now (loopback delivers
		// within sendto); the deadline is reached only when a record is
		// missing.
		got := 0
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		for got < n {
			k, src, err := rx.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatalf("cycle %d: %d of %d accepted records arrived (%v); producer stats %+v", i, got, n, err, p.Stats())
			}
			if src != from {
				continue // an earlier cycle's producer
			}
			for d := buf[:k]; len(d) > 0; {
				h, pl, size, err := wal.DecodeFrame(d)
				if err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
				if h.Type == 100 {
					got++
					if s := wal.Seq(pl); s != uint64(got) {
						t.Fatalf("cycle %d: record %d carries seq %d", i, got, s)
					}
				}
				d = d[size:]
			}
		}
	}
}
