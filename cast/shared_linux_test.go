package cast

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/datapath/udp"
)

// TestSharedThreadProducerConsumer: a producer (WAL on) and a consumer
// in one process, both loops on one SharedThread, over real loopback
// sockets, the consumer losing 3 % of what it receives: every record
// arrives once, in order, repaired by NAKs; the producer's loop goes on
// after the consumer's has ended.
func TestSharedThreadProducerConsumer(t *testing.T) {
	const n = 30_000
	st, err := NewSharedThread(affinity.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	up, err := udp.New(udp.Config{Local: loopback})
	if err != nil {
		t.Fatal(err)
	}
	lossy := drop.New(up, drop.Config{RecvPct: 3, Seed: 7}, 64, 2048)
	c, err := NewConsumer(ConsumerConfig{Path: lossy, NoCatchUp: true, Advanced: ConsumerAdvanced{Shared: st}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProducer(ProducerConfig{To: up.LocalAddr(), Local: loopback, Dir: t.TempDir(), Advanced: ProducerAdvanced{Shared: st}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var next uint64
	done := runInOrder(ctx, c, n, &next)
	publishN(t, p, n)
	if err := <-done; err != nil {
		t.Fatalf("consumer: %v (producer %+v)", err, p.Stats().Sender)
	}
	cs := c.Stats().Receiver
	if dropped, _ := lossy.Dropped(); dropped == 0 || cs.NaksSent == 0 {
		t.Fatalf("nothing was lost and repaired: %d dropped, %d NAKs", dropped, cs.NaksSent)
	}
	if got := next - 1; got != n {
		t.Fatalf("delivered %d of %d", got, n)
	}
	// The consumer's loop has ended; the producer's goes on alone.
	it := p.Stats().Loop.Iterations
	deadline := time.Now().Add(time.Minute)
	for p.Stats().Loop.Iterations == it {
		if time.Now().After(deadline) {
			t.Fatal("the producer's loop stopped with the consumer's")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedThreadClose: Close stops every loop on the thread (their
// Done closes; their own Close still releases the path, and reports
// nothing lost when all they took was sent) and later
// loops are refused with ErrClosed. A loop on a shared thread must
// spin: an idle strategy that waits is refused.
func TestSharedThreadClose(t *testing.T) {
	st, err := NewSharedThread(affinity.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var ps []*Producer
	for range 3 {
		p, err := NewProducer(ProducerConfig{To: loopback, Local: loopback, Advanced: ProducerAdvanced{Shared: st}})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	// One leaves early; the others go on.
	if err := ps[0].Close(); err != nil {
		t.Fatal(err)
	}
	publishN(t, ps[1], 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ps[1].Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps[1:] {
		select {
		case <-p.Done():
		case <-time.After(time.Minute):
			t.Fatalf("producer %d's loop did not stop with the shared thread", i+1)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewProducer(ProducerConfig{To: loopback, Local: loopback, Advanced: ProducerAdvanced{Shared: st}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a producer on a closed shared thread: %v, want ErrClosed", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	st2, _ := NewSharedThread(affinity.DefaultConfig())
	defer st2.Close()
	for _, s := range []affinity.Strategy{affinity.Park, affinity.Backoff, affinity.SpinYield} {
		_, err := NewProducer(ProducerConfig{To: loopback, Local: loopback, Idle: affinity.Idler{Strategy: s}, Advanced: ProducerAdvanced{Shared: st2}})
		if !errors.Is(err, ErrConfig) {
			t.Fatalf("idle %v on a shared thread: %v, want ErrConfig", s, err)
		}
	}
	if _, err = NewSharedThread(affinity.Config{Pin: true, CPU: -5}); !errors.Is(err, affinity.ErrConfig) {
		t.Fatalf("a shared thread on CPU -5: %v, want affinity.ErrConfig", err)
	}
}
