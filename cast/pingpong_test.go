package cast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// vPingPong is the casting RTT benchmark's exchange (internal/benchkit
// rttCasting) between two real Loops on datapath/mem and its virtual
// clock, each Loop a Sender and a Receiver: the pinger sends one record,
// the echo sends it back on its own stream, the pinger sends the next when
// the reply arrives. The test steps the loops' iterations itself, each on
// its own schedule, as threads a loaded machine runs now and then.
type vPingPong struct {
	p          *mem.Pair
	ping, echo *Loop
	i, total   int
	out        bool     // ping i is in flight
	replies    [][]byte // echo: replies its Sender refused, sent again on OnPoll
	sendBatch  bool     // echo: replies go out with SendBatch, not Send
	shut       [2]int   // Sends refused by flow control: pinger, echo
	payload    []byte
	lastRT     int64 // virtual time of the last round trip

	every [2]int64 // iteration period of the pinger and the echo, ns
	at    [2]int64 // next iteration of each
	rng   *rand.Rand
}

func newVPingPong(t *testing.T, total, batch int, noFC bool) *vPingPong {
	t.Helper()
	pp := &vPingPong{p: mem.NewPair(1_000_000_000), total: total, payload: make([]byte, 128)}
	lat := mem.Impairment{Latency: 10 * time.Microsecond}
	pp.p.Net.Impair(mem.AddrA, mem.AddrB, lat)
	pp.p.Net.Impair(mem.AddrB, mem.AddrA, lat)
	loop := func(end *mem.End, onRecord func(*Loop, wire.Header, []byte), onPoll func(*Loop, int64)) *Loop {
		sc := protocol.DefaultSenderConfig()
		sc.NoFlowControl = noFC
		s, err := protocol.NewSender(sc, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := protocol.NewReceiver(protocol.DefaultReceiverConfig())
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultLoopConfig()
		cfg.Path, cfg.Sender, cfg.Receiver, cfg.Batch = end, s, r, batch
		cfg.OnRecord, cfg.OnPoll = onRecord, onPoll
		l, err := NewLoop(cfg)
		if err != nil {
			t.Fatal(err)
		}
		l.vclock = pp.p.Clock.Now
		l.now = l.clock()
		l.next = l.now
		t.Cleanup(func() { l.Close() })
		return l
	}
	pp.ping = loop(pp.p.A, func(l *Loop, _ wire.Header, p []byte) {
		if len(p) < 16 || binary.LittleEndian.Uint64(p[8:]) != uint64(pp.i) {
			return
		}
		pp.out = false
		pp.i++
		pp.lastRT = l.Now()
		pp.sendPing(l)
	}, func(l *Loop, _ int64) {
		if !pp.out {
			pp.sendPing(l)
		}
	})
	pp.echo = loop(pp.p.B, func(l *Loop, _ wire.Header, p []byte) {
		pp.replies = append(pp.replies, append([]byte(nil), p...))
		pp.sendReplies(l)
	}, func(l *Loop, _ int64) { pp.sendReplies(l) })
	return pp
}

func (pp *vPingPong) refused(k int, err error) {
	switch {
	case errors.Is(err, protocol.ErrBackpressure):
		pp.shut[k]++
	case errors.Is(err, protocol.ErrBatchFull):
	default:
		panic(err)
	}
}

func (pp *vPingPong) sendPing(l *Loop) {
	if pp.i >= pp.total {
		return
	}
	binary.LittleEndian.PutUint64(pp.payload[8:], uint64(pp.i))
	if _, err := l.Send(1, pp.payload); err != nil {
		pp.refused(0, err)
		return
	}
	pp.out = true
}

func (pp *vPingPong) sendReplies(l *Loop) {
	if pp.sendBatch && len(pp.replies) > 0 {
		n, err := l.SendBatch(1, pp.replies)
		pp.replies = pp.replies[n:]
		if err != nil {
			pp.refused(1, err)
		}
		return
	}
	for len(pp.replies) > 0 {
		if _, err := l.Send(1, pp.replies[0]); err != nil {
			pp.refused(1, err)
			return
		}
		pp.replies = pp.replies[1:]
	}
}

// run iterates each loop at its own times until every round trip is done
// or none completed for stall (virtual time).
func (pp *vPingPong) run(stall time.Duration) {
	pp.lastRT = pp.p.Clock.Now()
	for pp.i < pp.total {
		now := min(pp.at[0], pp.at[1])
		pp.p.Clock.Set(max(now, pp.p.Clock.Now()))
		if pp.p.Clock.Now()-pp.lastRT > int64(stall) {
			return
		}
		for k, l := range []*Loop{pp.ping, pp.echo} {
			if pp.at[k] > pp.p.Clock.Now() {
				continue
			}
			if !l.iterate() {
				panic(l.err)
			}
			pp.at[k] = pp.p.Clock.Now() + max(pp.every[k], 1000)
			if pp.rng != nil && pp.rng.IntN(300) == 0 {
				// Descheduled: mostly short, now and then for 100 ms.
				d := int64(pp.rng.ExpFloat64() * float64(time.Millisecond))
				if pp.rng.IntN(30) == 0 {
					d *= 100
				}
				pp.at[k] += d
			}
		}
	}
}

// A ping-pong of 10 000 round trips (well past the 2048-record window and
// initial window) between two Loops, each a Sender and a Receiver at the
// default configs, completes and is never refused by flow control: with
// one record in flight each way, no window may close. Schedules: both
// loops iterating every µs; each finding the peer's next record every time
// it looks (the casting RTT benchmark under load: a Batch of 1 then always
// holds the record OnRecord sent, and the Status and probes the cores owe
// waited for an idle iteration that never came, so the peer's window
// closed on stale news: the benchmark stalled, its echo dropping the
// refused reply); and loops descheduled at random. Also with NoFlowControl
// on both Senders (the reference's behaviour: no initial window either,
// which no Status could end and so would hold for InitialWait at record
// 2049).
func TestLoopPingPongBeyondWindow(t *testing.T) {
	type sched struct {
		name  string
		every [2]int64
		phase int64 // the echo's first iteration
		seed  uint64
	}
	scheds := []sched{
		{name: "lockstep"},
		{name: "always-a-record", every: [2]int64{50_000, 50_000}, phase: 25_000},
		{name: "descheduled", every: [2]int64{5_000, 5_000}, seed: 1},
	}
	for _, batch := range []int{1, 64} {
		for _, noFC := range []bool{false, true} {
			for _, sc := range scheds {
				if sc.seed != 0 && batch != 1 {
					continue // the slowest schedule, once
				}
				name := fmt.Sprintf("batch%d/noFC=%v/%s%d", batch, noFC, sc.name, sc.seed)
				t.Run(name, func(t *testing.T) {
					pp := newVPingPong(t, 10_000, batch, noFC)
					pp.every = sc.every
					start := pp.p.Clock.Now()
					pp.at = [2]int64{start, start + sc.phase}
					if sc.seed != 0 {
						pp.rng = rand.New(rand.NewPCG(sc.seed, 11))
					}
					pp.run(5 * time.Second)
					ls, es := pp.ping.ReceiverStats(), pp.echo.ReceiverStats()
					if pp.i != pp.total || pp.shut != [2]int{} || pp.ping.rcv.Outcome().Kind != protocol.Live || pp.echo.rcv.Outcome().Kind != protocol.Live {
						pp.ping.snapshot()
						pp.echo.snapshot()
						t.Fatalf("%d of %d round trips in %.3f s (virtual); Sends refused by flow control: %d pings, %d replies\n"+
							"pinger: sender %+v\n receiver %+v outcome %+v\necho: sender %+v\n receiver %+v outcome %+v",
							pp.i, pp.total, float64(pp.p.Clock.Now()-start)/1e9, pp.shut[0], pp.shut[1],
							pp.ping.SenderStats(), ls, pp.ping.rcv.Outcome(), pp.echo.SenderStats(), es, pp.echo.rcv.Outcome())
					}
				})
			}
		}
	}
}

// A Send that leaves the batch full sends it at once, not at the end of
// the iteration: with Batch 1 (the latency setting) the echo's reply is on
// the wire before its OnRecord returns, ahead of the Status and timer work
// of the iteration (the round trip's turnaround); the same with SendBatch.
// With Batch 64 the reply waits in the batch for the iteration's flush, as
// it always did.
func TestLoopSendFlushesFullBatch(t *testing.T) {
	for _, batch := range []int{1, 64} {
		for _, sendBatch := range []bool{false, true} {
			t.Run(fmt.Sprintf("batch%d/SendBatch=%v", batch, sendBatch), func(t *testing.T) {
				pp := newVPingPong(t, 500, batch, false)
				pp.sendBatch = sendBatch
				onRecord := pp.echo.cfg.OnRecord
				sent, onWire := 0, 0
				pp.echo.cfg.OnRecord = func(l *Loop, h wire.Header, p []byte) {
					before := pp.p.A.Pending()
					onRecord(l, h, p)
					if len(pp.replies) == 0 { // the reply was sent, not refused
						sent++
						if pp.p.A.Pending() > before {
							onWire++
						}
					}
				}
				pp.run(time.Second)
				if pp.i != pp.total {
					t.Fatalf("%d of %d round trips", pp.i, pp.total)
				}
				want := 0
				if batch == 1 {
					want = sent
				}
				if sent < pp.total/2 || onWire != want {
					t.Fatalf("%d replies sent from OnRecord, %d of them on the wire before it returned; want %d",
						sent, onWire, want)
				}
			})
		}
	}
}

// failSend is a Path whose Send fails.
type failSend struct{ *mem.End }

var errSendBroken = errors.New("test: send broken")

func (failSend) Send(*batch.Vec) (int, error) { return 0, errSendBroken }

// A path error met by the early flush of a full batch is not the Send's:
// the record has its seq and sits in the hot ring, and an application
// that retried on the error would send it twice. Send returns the seq and
// no error; the iteration's own flush meets the error and fails the loop.
func TestLoopSendFullBatchPathError(t *testing.T) {
	p := mem.NewPair(1_000_000_000)
	s, err := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	var sendErr error
	sent := false
	cfg := DefaultLoopConfig()
	cfg.Path, cfg.Sender, cfg.Batch = failSend{p.A}, s, 1
	cfg.OnPoll = func(l *Loop, _ int64) {
		if !sent {
			sent = true
			seq, sendErr = l.Send(1, make([]byte, 64))
		}
	}
	l, err := NewLoop(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.vclock = p.Clock.Now
	ok := l.iterate()
	if !sent || seq != 1 || sendErr != nil {
		t.Fatalf("Send: seq %d, err %v; want seq 1 and no error", seq, sendErr)
	}
	if ok || !errors.Is(l.err, errSendBroken) {
		t.Fatalf("iteration: ok %v, loop error %v; want the loop failed with %v", ok, l.err, errSendBroken)
	}
}
