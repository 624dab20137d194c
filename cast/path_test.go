package cast

import (
	"context"
	"testing"

	"github.com/walcast/walcast/datapath/stdnet"
)

// TestProducerConsumerPortable runs a producer and a consumer over the
// portable datapath (the default off Linux) on loopback, with a WAL:
// what the library does on every GOOS, checked on this one too.
func TestProducerConsumerPortable(t *testing.T) {
	cp, err := stdnet.Listen(stdnet.Config{Local: loopback})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConsumer(ConsumerConfig{Path: cp, Plaintext: true, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	pp, err := stdnet.Listen(stdnet.Config{Local: loopback, Peer: c.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProducer(ProducerConfig{To: c.Addr(), Path: pp, Dir: t.TempDir(), Replay: true, Plaintext: true, Idle: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	const n = 20_000
	for range n {
		if err := p.Publish(ctx, 1, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	var got, next uint64 = 0, 1
	err = c.Run(ctx, func(r Record) error {
		if r.Seq != next {
			t.Fatalf("seq %d, want %d", r.Seq, next)
		}
		got, next = got+1, next+1
		if r.Seq == n {
			return ErrStop
		}
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("Run = %v after %d records", err, got)
	}
}
