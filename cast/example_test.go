package cast_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"net/netip"
	"os"
	"path/filepath"

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

// A producer without a log keeps its records in the sender's hot ring
// (4096 records by default), which is where a consumer's NAKs are
// answered from. Flush returns once every record Publish accepted has
// been sent. The consumer goes without TCP catch-up (NoCatchUp): there
// is no log to catch up from.
func ExampleProducer() {
	ctx := context.Background()
	c, err := cast.NewConsumer(cast.ConsumerConfig{Local: netip.MustParseAddrPort("127.0.0.1:0"), NoCatchUp: true})
	if err != nil {
		log.Fatal(err)
	}
	p, err := cast.NewProducer(cast.ProducerConfig{To: c.Addr()})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	record := make([]byte, 16) // bytes 0-7: the seq; 8-15: ours
	for i := range uint64(1000) {
		binary.LittleEndian.PutUint64(record[8:], i*i)
		if err := p.Publish(ctx, 1, record); err != nil {
			log.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent", p.Stats().Sent)
	var sum uint64
	err = c.Run(ctx, func(r cast.Record) error {
		sum += binary.LittleEndian.Uint64(r.Payload[8:])
		if r.Seq == 1000 {
			return cast.ErrStop
		}
		return nil
	})
	fmt.Println("received", c.Stats().Tip, "records, sum", sum, "error", err)
	// Output:
	// sent 1000
	// received 1000 records, sum 332833500 error <nil>
}

// A consumer with a tip file stops half way; a new one (a restarted
// process, say) resumes after the tip: it catches up over TCP from the
// producer's log what it missed while it was away, then goes live over
// UDP. It binds the address the producer sends to, so the producer
// needs no change.
func ExampleConsumer() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "walcast-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tip := filepath.Join(dir, "tip")
	c, err := cast.NewConsumer(cast.ConsumerConfig{Local: netip.MustParseAddrPort("127.0.0.1:0"), Plaintext: true, TipPath: tip})
	if err != nil {
		log.Fatal(err)
	}
	p, err := cast.NewProducer(cast.ProducerConfig{To: c.Addr(), Dir: filepath.Join(dir, "wal"), Replay: true, Plaintext: true})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	publish := func(n int) {
		for range n {
			if err := p.Publish(ctx, 1, make([]byte, 64)); err != nil {
				log.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil { // sent, and durable in the log
			log.Fatal(err)
		}
	}
	publish(1000)
	err = c.Run(ctx, func(r cast.Record) error {
		if r.Seq == 600 {
			return cast.ErrStop // applied; Run writes the tip file and returns nil
		}
		return nil
	})
	fmt.Println("first run: tip", c.Tip(), "error", err)

	publish(1000) // seqs 1001-2000 go out while no consumer listens
	c, err = cast.NewConsumer(cast.ConsumerConfig{Local: c.Addr(), Plaintext: true, TipPath: tip,
		OnEvent: func(e cast.Event) {
			if e.Kind == cast.EventCatchingUp {
				fmt.Println("event:", e.Kind, "from", e.From)
			}
		}})
	if err != nil {
		log.Fatal(err)
	}
	first := uint64(0)
	err = c.Run(ctx, func(r cast.Record) error {
		if first == 0 {
			first = r.Seq
		}
		if r.Seq == 2000 {
			return cast.ErrStop
		}
		return nil
	})
	s := c.Stats()
	fmt.Println("second run: seqs", first, "to", s.Tip, "of which over TCP", s.TCPRecords, "error", err)
	// Output:
	// first run: tip 600 error <nil>
	// event: catching_up from 601
	// second run: seqs 601 to 2000 of which over TCP 1400 error <nil>
}
