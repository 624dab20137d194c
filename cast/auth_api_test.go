package cast

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// A keyed Producer and Consumer over real loopback sockets: every record
// arrives once and in order, the Consumer learns the producer's address
// only from an authenticated datagram (a forger's unsealed heartbeats and
// records sent first are ignored), and a payload that no longer fits
// beside the trailer is refused at once.
func TestProducerConsumerKeys(t *testing.T) {
	const n = 5_000
	c, err := NewConsumer(ConsumerConfig{Local: loopback, NoCatchUp: true, Idle: quiet, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	forger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	toR, _ := forgeries(1)
	for range 20 {
		for _, d := range toR {
			if _, err := forger.WriteToUDPAddrPort(d, c.Addr()); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := make(chan error, 1)
	var next uint64 = 1
	go func() {
		done <- c.Run(context.Background(), func(r Record) error {
			if r.Seq != next {
				return fmt.Errorf("seq %d, want %d", r.Seq, next)
			}
			next++
			if r.Seq == n {
				return ErrStop
			}
			return nil
		})
	}()
	p, err := NewProducer(ProducerConfig{To: c.Addr(), Local: loopback, Idle: quiet, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	big := make([]byte, 1472-16-wire.TrailerSize+1)
	if err := p.Publish(context.Background(), 100, big); err == nil {
		t.Fatal("a payload that does not fit beside the trailer was accepted")
	}
	publishN(t, p, n)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("consumer did not finish: producer %+v, consumer %+v", p.Stats().Sender, c.Stats().Receiver)
	}
	if cs := c.Stats(); cs.Tip != n {
		t.Fatalf("tip %d of %d", cs.Tip, n)
	}
	if s := p.Stats().Sender; s.Statuses == 0 {
		t.Fatalf("no authenticated Status reached the producer: %+v", s)
	}
}
