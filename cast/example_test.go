package cast_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"

	"github.com/walcast/walcast/cast"
)

// A producer with a write-ahead log sends 100,000 records to a consumer
// on loopback. The consumer starts reading only afterwards, so most of
// the stream has overflowed its socket buffer: it learns the producer's
// address from the first datagram it finds, catches up over TCP from the
// producer's log (the replay server listens on the producer's own
// address and port), then goes live over UDP and repairs what is left
// with NAKs. Every record arrives once, in order.
func Example() {
	ctx := context.Background()
	c, err := cast.NewConsumer(cast.ConsumerConfig{Local: netip.MustParseAddrPort("127.0.0.1:0"), Plaintext: true})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "walcast-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := cast.NewProducer(cast.ProducerConfig{To: c.Addr(), Dir: dir, Replay: true, Plaintext: true})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	record := make([]byte, 64) // the first 8 bytes carry the seq
	for range 100_000 {
		if err := p.Publish(ctx, 1, record); err != nil {
			log.Fatal(err)
		}
	}
	var n, sum uint64
	err = c.Run(ctx, func(r cast.Record) error {
		n, sum = n+1, sum+r.Seq
		if r.Seq == 100_000 {
			return cast.ErrStop
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "records, seqs sum to", sum)
	// Output: 100000 records, seqs sum to 5000050000
}
