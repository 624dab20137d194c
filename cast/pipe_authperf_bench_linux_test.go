package cast

import (
	"fmt"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/wire"
)

// authperfKeys key the +auth rows of BenchmarkLoopPipeAuth.
var authperfKeys = &Keys{Send: wire.Key{ID: 1, Secret: [16]byte{0x61, 0x75, 0x74, 0x68}}}

// BenchmarkLoopPipeAuth is BenchmarkLoopPipe with and without keys side by
// side (and with and without coalescing): what authentication adds to the
// casting layer's user-space work per record, the kernel left out
// (pipeKernel). Sizes are frame sizes; the +auth datagrams are
// wire.TrailerSize bytes longer (the slots have room: the Sender's
// MaxFrame is the same in both rows, so that a coalesced datagram holds
// the same records and the difference is the authentication alone).
func BenchmarkLoopPipeAuth(b *testing.B) {
	for _, size := range []int{144, 1443} {
		for _, coalesce := range []bool{false, true} {
			for _, keys := range []*Keys{nil, authperfKeys} {
				name := fmt.Sprint(size)
				if coalesce {
					name += "+coalesce"
				}
				if keys != nil {
					name += "+auth"
				}
				b.Run(name, func(b *testing.B) { benchLoopPipeAuth(b, size, coalesce, keys) })
			}
		}
	}
}

func benchLoopPipeAuth(b *testing.B, size int, coalesce bool, keys *Keys) {
	const per = 64
	pa, pb := openPair(b, "mmsg", false)
	a, bb := pa.(*mmsg.Path), pb.(*mmsg.Path)
	if !a.Features().GSO || !bb.Features().GRO {
		b.Skipf("needs GSO and GRO: %s %s", a.Features().GSOReason, bb.Features().GROReason)
	}
	k := newPipeKernel(a, bb)
	saved := batch.Sys
	batch.Sys.Sendmmsg, batch.Sys.Recvmmsg = k.sendmmsg, k.recvmmsg
	b.Cleanup(func() { batch.Sys = saved })

	rcv, err := protocol.NewReceiver(protocol.DefaultReceiverConfig())
	if err != nil {
		b.Fatal(err)
	}
	var got int
	slot := max(protocol.DefaultMaxFrame, 2048)
	rl, err := NewLoop(LoopConfig{Path: pb, Receiver: rcv, Batch: per, Slot: slot, Keys: keys,
		OnRecord: func(*Loop, wire.Header, []byte) { got++ }})
	if err != nil {
		b.Fatal(err)
	}
	sc := protocol.DefaultSenderConfig()
	sc.Coalesce = coalesce // MaxFrame kept: the same frames per datagram with and without keys
	snd, err := protocol.NewSender(sc, nil)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, size-wire.HeaderSize)
	sent, refused := 0, 0
	sl, err := NewLoop(LoopConfig{Path: pa, Sender: snd, Batch: per, Slot: slot, Keys: keys,
		OnPoll: func(l *Loop, _ int64) {
			for range per {
				if _, err := l.Send(1, payload); err != nil {
					refused++
					return
				}
				sent++
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	clock := &benchClock{}
	sl.vclock, rl.vclock = clock.now, clock.now
	step := func() {
		if !sl.iterate() || !rl.iterate() {
			b.Fatal(sl.err, rl.err)
		}
	}
	for range 100 {
		step()
	}
	sent0, got0 := sent, got
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.StopTimer()
	if got-got0 < (sent-sent0)/2 {
		b.Fatalf("sent %d, delivered %d, refused %d", sent-sent0, got-got0, refused)
	}
	if keys != nil {
		if st := rl.auth.stats; st.Refused() > 0 {
			b.Fatalf("receiver refused %+v", st)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(got-got0), "ns/rec")
	b.ReportMetric(float64(got-got0)/float64(b.N), "rec/op")
}
