package cast

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
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
	buf := make([]byte, 65536)
	for i := range cycles {
		p, err := NewProducer(ProducerConfig{To: to, Local: loopback, Idle: quiet, Advanced: ProducerAdvanced{PublishSlots: 64, Sender: smallRing}})
		if err != nil {
			t.Fatal(err)
		}
		from := p.Addr()
		n := 1 + rng.IntN(300) // up to ~5 publish queues' worth
		publishN(t, p, n)
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
				h, pl, size, err := wire.DecodeFrame(d)
				if err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
				if h.Type == 100 {
					got++
					if s := wire.Seq(pl); s != uint64(got) {
						t.Fatalf("cycle %d: record %d carries seq %d", i, got, s)
					}
				}
				d = d[size:]
			}
		}
	}
}

// TestProducerConsumerFlowControl: flow control is on with zero configs.
// An unpaced producer and a consumer whose callback is slower than the
// producer, over real loopback sockets: the consumer's Status frames
// reach the producer, which holds back (Backpressured) instead of
// overrunning it, and every record arrives once, in order. When the
// consumer stops, it says so and the producer stops waiting for it.
func TestProducerConsumerFlowControl(t *testing.T) {
	const n = 40_000
	c, err := NewConsumer(ConsumerConfig{Local: loopback, NoCatchUp: true, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProducer(ProducerConfig{To: c.Addr(), Local: loopback, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	done := make(chan error, 1)
	var next uint64 = 1
	go func() {
		done <- c.Run(ctx, func(r Record) error {
			if r.Seq != next {
				return fmt.Errorf("seq %d, want %d", r.Seq, next)
			}
			next++
			if r.Seq%64 == 0 {
				time.Sleep(time.Millisecond) // ~64k records/s at most: slower than the producer
			}
			if r.Seq == n {
				return ErrStop
			}
			return nil
		})
	}()
	publishN(t, p, n)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("consumer did not finish: producer %+v, consumer %+v", p.Stats().Sender, c.Stats().Receiver)
	}
	ps, cs := p.Stats().Sender, c.Stats()
	if cs.Tip != n || cs.Receiver.StatusSent == 0 || ps.Statuses == 0 || ps.ReceiversJoined == 0 || ps.Backpressured == 0 {
		t.Fatalf("tip %d; consumer sent %d Status; producer: %d accepted, %d receivers joined, %d sends held back",
			cs.Tip, cs.Receiver.StatusSent, ps.Statuses, ps.ReceiversJoined, ps.Backpressured)
	}
	t.Logf("producer held back %d times; consumer NAKed %d seqs, %d Status", ps.Backpressured, cs.Receiver.NakSeqs, cs.Receiver.StatusSent)
	// The consumer left and said so: more records than its last window
	// allowed are sent without waiting for it to time out (a Leave, not
	// a silence, removed it).
	publishN(t, p, 10_000)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("Flush after the consumer left: %v; sender %+v", err, p.Stats().Sender)
	}
	if s := p.Stats().Sender; s.ReceiversLost != 0 {
		t.Fatalf("the consumer was dropped for silence, not on its Leave: %+v", s)
	}
}

// TestProducerEnd: Producer.End over real loopback sockets. The producer
// publishes n records and ends the stream; the consumer delivers every
// record once, in order, reports the end at seq n (EventEnded) and
// its Run returns nil by itself; End returns nil once the consumer has
// left, and Publish after End is refused with ErrEnded. A second
// producer with nobody listening ends at once.
func TestProducerEnd(t *testing.T) {
	const n = 5_000
	ended := make(chan uint64, 1)
	c, err := NewConsumer(ConsumerConfig{Local: loopback, NoCatchUp: true, Idle: quiet,
		OnEvent: func(e Event) {
			if e.Kind == EventEnded {
				ended <- e.Seq
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProducer(ProducerConfig{To: c.Addr(), Local: loopback, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var next uint64
	done := runInOrder(ctx, c, 0, &next)
	publishN(t, p, n)
	if err := p.End(ctx); err != nil {
		t.Fatalf("End: %v; sender %+v; consumer %+v", err, p.Stats().Sender, c.Stats().Receiver)
	}
	if err := p.Publish(ctx, 100, make([]byte, 16)); !errors.Is(err, ErrEnded) {
		t.Fatalf("Publish after End: %v, want ErrEnded", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("consumer did not end: producer %+v, consumer %+v", p.Stats().Sender, c.Stats().Receiver)
	}
	if final := <-ended; final != n || next != n+1 {
		t.Fatalf("ended at %d after delivering through %d, want %d", final, next-1, n)
	}
	// Each join ends in a loss (no Status for ReceiverTimeout) or a Leave.
	// A loaded machine may leave the consumer's loop unrun for over a
	// second mid-stream (lost, then joined again: CI at load 10 did); the
	// last departure, the one End waited for, must be its Leave.
	if s := p.Stats().Sender; s.SessionEnds == 0 || s.ReceiversJoined == 0 || s.ReceiversLost >= s.ReceiversJoined {
		t.Fatalf("want markers sent and the consumer gone on its Leave: %+v", s)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	// Nobody ever sent Status: no marker is negotiated and End returns
	// without waiting (its context would fail it otherwise).
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	q, err := NewProducer(ProducerConfig{To: rx.LocalAddr().(*net.UDPAddr).AddrPort(), Local: loopback, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	publishN(t, q, 10)
	if err := q.End(ctx); err != nil {
		t.Fatalf("End with no receiver: %v", err)
	}
}

// runInOrder runs c on a goroutine and returns the channel that gets
// Run's result. Its deliver fails unless records come in seq order from
// seq 1, and stops Run (ErrStop) after seq stopAt (0: never); *next is
// the seq it expects next (read it once the result is in).
func runInOrder(ctx context.Context, c *Consumer, stopAt uint64, next *uint64) <-chan error {
	*next = 1
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, func(r Record) error {
			if r.Seq != *next {
				return fmt.Errorf("seq %d, want %d", r.Seq, *next)
			}
			if *next++; r.Seq == stopAt {
				return ErrStop
			}
			return nil
		})
	}()
	return done
}
