package protocol_test

import (
	"fmt"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// The sans-I/O core over the in-memory datapath, on a virtual clock: the
// caller owns the loop, the clock and the batches. The link loses records
// 3 and 4 (datagrams #4 and #5: after record 1 the Receiver's Status turns
// flow control on, and the Sender's RTT probes are datagrams too); the
// Receiver NAKs the gap as soon as the fifth record reveals it, the
// Sender serves the NAK from its hot ring, and delivery stays in seq
// order. No socket, goroutine or real time is
// involved, so a run is exactly repeatable.
func Example() {
	pair := mem.NewPair(1)                                                    // ends A and B on a virtual clock
	pair.Net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Drop: []int{4, 5}})  // datagrams #4 and #5 (0-based) are lost
	snd, _ := protocol.NewSender(protocol.SenderConfig{Dest: mem.AddrB}, nil) // nil: no WAL, seqs from 1
	rcv, _ := protocol.NewReceiver(protocol.ReceiverConfig{Sender: mem.AddrA})
	rcv.ResetAfterReplay(0) // expect seq 1: a gap at the start is a gap too

	out, in := batch.New(64, 2048), batch.New(64, 2048)
	deliver := func(h wire.Header, p []byte) { fmt.Printf("delivered seq %d: %s\n", wire.Seq(p), p[8:]) }
	step := func() { // one round of both loops, then 1 ms passes
		now := pair.Clock.Now()
		pair.A.Send(out)
		out.Reset()
		n, _ := pair.B.Recv(in)
		for i := range n {
			d, _ := in.Msg(i)
			rcv.Handle(d, now, out, deliver) // NAKs go into out, addressed to A
		}
		rcv.Tick(now, out)
		pair.B.Send(out)
		out.Reset()
		n, _ = pair.A.Recv(in)
		for i := range n {
			d, from := in.Msg(i)
			snd.Handle(d, from, now, out) // retransmits go into out
		}
		snd.Tick(now, out)
		pair.Clock.Advance(time.Millisecond)
	}
	for i := 1; i <= 5; i++ {
		snd.Send(100, fmt.Appendf(make([]byte, 8), "record %d", i), pair.Clock.Now(), out)
		step()
	}
	for range 3 {
		step()
	}
	s, r := snd.Stats(), rcv.Stats()
	fmt.Printf("sent %d, retransmitted %d from the hot ring; %d NAK for %d records\n", s.Sent, s.RetxHot, r.NaksSent, r.NakSeqs)
	// Output:
	// delivered seq 1: record 1
	// delivered seq 2: record 2
	// delivered seq 3: record 3
	// delivered seq 4: record 4
	// delivered seq 5: record 5
	// sent 5, retransmitted 2 from the hot ring; 1 NAK for 2 records
}
