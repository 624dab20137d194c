package protocol

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// TestSendBatchIsSendLoop: SendBatch sends what a loop of Send sends.
// Two harnesses run the same script on the virtual clock, one sending
// with Send, one with SendBatch, through the start-up window and its
// probe, negotiation, a window held shut by a slow consumer, loss and
// repair, with and without a log, coalescing and a batch too large for
// views: every datagram the two senders send is the same, byte for byte,
// and so are their counters, their next seq and what was delivered.
func TestSendBatchIsSendLoop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(o *harnessOpt)
		log   bool // the fake log, else none
		slow  bool // a consumer that takes 20 records a step from a queue of 100
		loss  float64
		// mayFault: the receiver may give up (a reference receiver
		// overrun with no flow control); the two runs must still agree.
		mayFault bool
		// firstNakLost: the first NAK is lost, so the probe's record is
		// still withheld when the Status beside it negotiates.
		firstNakLost bool
	}{
		{name: "walcast peers, no log"},
		{name: "walcast peers, log", log: true},
		{name: "reference receiver (no Status): start-up window, probe, release", setup: func(o *harnessOpt) { o.r.NoStatus = true }},
		{name: "reference receiver, 20% loss: the probe's NAK lost", setup: func(o *harnessOpt) { o.r.NoStatus = true }, loss: 0.2, mayFault: true},
		{name: "walcast peers, the probe's NAK lost: the withheld record goes out", firstNakLost: true, setup: func(o *harnessOpt) { o.s.InitialWindow = 32 }},
		{name: "slow consumer: the window shuts and opens", slow: true, setup: func(o *harnessOpt) { o.r.ReorderSlots = 256 }},
		{name: "5% loss both ways", loss: 0.05},
		{name: "5% loss both ways, log", log: true, loss: 0.05},
		{name: "coalescing", setup: func(o *harnessOpt) { o.s.Coalesce = true }, loss: 0.02},
		{name: "no flow control", setup: func(o *harnessOpt) { o.s.NoFlowControl = true }, loss: 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(batched bool) *harness {
				o := defaultOpt()
				o.noLog = !tc.log
				o.s.ID = 42 // else random: the two senders must be alike
				if tc.setup != nil {
					tc.setup(&o)
				}
				h := newHarness(t, o)
				h.batched, h.tracing = batched, true
				if tc.slow {
					h.queueCap, h.autoConsume = 100, 20
				}
				if tc.loss > 0 {
					h.impairData(mem.Impairment{Seed: 7, DropProb: tc.loss})
					h.impairNaks(mem.Impairment{Seed: 8, DropProb: tc.loss})
				}
				if tc.firstNakLost {
					naks := 0
					h.impairNaks(mem.Impairment{Script: func(_ int, b []byte) mem.Action {
						if le.Uint16(b[2:]) == wire.TypeNak {
							if naks++; naks == 1 {
								return mem.Drop
							}
						}
						return mem.Pass
					}})
				}
				rng := rand.New(rand.NewPCG(1, 2))
				total := 0
				for i := 0; i < 80; i++ {
					n := 1 + rng.IntN(150)
					h.send(n)
					total += n
					h.run(time.Duration(rng.IntN(3))*ms, 100*us)
				}
				h.run(2000*ms, ms)
				if h.orderError != nil {
					t.Fatal(h.orderError)
				}
				if h.delivered != uint64(total) && !tc.mayFault {
					t.Fatalf("batched %v: delivered %d of %d; receiver %+v %+v; sender %+v", batched, h.delivered, total, h.r.Outcome(), h.r.Stats(), h.s.Stats())
				}
				return h
			}
			a, b := run(false), run(true)
			if len(a.trace) != len(b.trace) {
				t.Fatalf("Send sent %d datagrams, SendBatch %d", len(a.trace), len(b.trace))
			}
			for i := range a.trace {
				if !bytes.Equal(a.trace[i], b.trace[i]) {
					t.Fatalf("datagram %d differs:\nSend      %x\nSendBatch %x", i, a.trace[i], b.trace[i])
				}
			}
			if a.s.Stats() != b.s.Stats() || a.s.NextSeq() != b.s.NextSeq() || a.backpressured != b.backpressured || a.delivered != b.delivered {
				t.Fatalf("Send: %+v next %d held %d\nSendBatch: %+v next %d held %d",
					a.s.Stats(), a.s.NextSeq(), a.backpressured, b.s.Stats(), b.s.NextSeq(), b.backpressured)
			}
		})
	}
}

// TestSendBatchRefusals: SendBatch stops at the first record Send would
// refuse, returns how many it sent before it and Send's error, and the
// sender is where that loop of Send would have left it.
func TestSendBatchRefusals(t *testing.T) {
	p := make([]byte, 64)
	short := make([]byte, 7)
	big := make([]byte, DefaultMaxFrame)
	for _, tc := range []struct {
		name     string
		typ      uint16
		payloads [][]byte
		outCap   int
		want     int
		err      error
	}{
		{"all sent", 100, [][]byte{p, p, p}, 64, 3, nil},
		{"short payload third", 100, [][]byte{p, p, short, p}, 64, 2, ErrPayloadShort},
		{"frame too large second", 100, [][]byte{p, big, p}, 64, 1, ErrFrameTooLarge},
		{"control type", wire.TypeNak, [][]byte{p}, 64, 0, ErrControlType},
		{"batch full after 4", 100, [][]byte{p, p, p, p, p, p}, 4, 4, ErrBatchFull},
		{"nothing", 100, nil, 64, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loop, _ := newTestSender(t, senderCfg(), nil)
			bat, _ := newTestSender(t, senderCfg(), nil)
			lo, bo := batch.New(tc.outCap, 2048), batch.New(tc.outCap, 2048)
			sent := 0
			var lerr error
			for _, pl := range tc.payloads {
				if _, lerr = loop.Send(tc.typ, pl, 5, lo); lerr != nil {
					break
				}
				sent++
			}
			n, err := bat.SendBatch(tc.typ, tc.payloads, 5, bo)
			if n != tc.want || !errors.Is(err, tc.err) || sent != n || !errors.Is(lerr, err) && lerr != err {
				t.Fatalf("SendBatch: %d, %v; want %d, %v (the Send loop: %d, %v)", n, err, tc.want, tc.err, sent, lerr)
			}
			if bat.NextSeq() != 1+uint64(n) || bat.Stats() != loop.Stats() || bo.Len() != lo.Len() {
				t.Fatalf("next %d stats %+v batch %d; the Send loop: next %d stats %+v batch %d",
					bat.NextSeq(), bat.Stats(), bo.Len(), loop.NextSeq(), loop.Stats(), lo.Len())
			}
			for i := 0; i < bo.Len(); i++ {
				b1, a1 := bo.Msg(i)
				b2, a2 := lo.Msg(i)
				if !bytes.Equal(b1, b2) || a1 != a2 {
					t.Fatalf("message %d differs", i)
				}
			}
		})
	}
}

// TestSendBatchAllocs: the batch path allocates nothing.
func TestSendBatchAllocs(t *testing.T) {
	s, out := newTestSender(t, senderCfg(), nil)
	ps := make([][]byte, 64)
	for i := range ps {
		ps[i] = make([]byte, 128)
	}
	allocs := testing.AllocsPerRun(200, func() {
		out.Reset()
		if n, err := s.SendBatch(100, ps, 0, out); err != nil || n != len(ps) {
			t.Fatalf("SendBatch: %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("SendBatch allocates %.1f times per batch", allocs)
	}
}

// TestHandleRunIsHandle: HandleRun does what a Handle per datagram does.
// Two harnesses run the same script on the virtual clock, one receiver
// taking each batch read with HandleRun, the other with a Handle per
// datagram, with and without HoldStatus, through loss, duplicates,
// reordering, corruption, a slow consumer, coalesced datagrams and a
// reference receiver: every datagram both receivers send is the same,
// and so are the deliveries, the counters and the outcome.
func TestHandleRunIsHandle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(o *harnessOpt)
		data  mem.Impairment
		naks  mem.Impairment
		slow  bool
		end   bool // the sender ends the session after the script
	}{
		{name: "clean"},
		{name: "5% loss both ways", data: mem.Impairment{Seed: 3, DropProb: 0.05}, naks: mem.Impairment{Seed: 4, DropProb: 0.05}},
		{name: "duplicates and reordering", data: mem.Impairment{Seed: 5, DupProb: 0.05, ReorderProb: 0.05, ReorderBy: 3}},
		{name: "corruption", data: mem.Impairment{Seed: 6, CorruptProb: 0.03, CorruptFrom: 4, DropProb: 0.01}},
		{name: "slow consumer", slow: true, setup: func(o *harnessOpt) { o.r.ReorderSlots = 256 }},
		{name: "coalescing sender", setup: func(o *harnessOpt) { o.s.Coalesce = true }, data: mem.Impairment{Seed: 9, DropProb: 0.03}},
		{name: "reference receiver", setup: func(o *harnessOpt) { o.r.NoStatus = true; o.s.InitialWindow = 32 }, data: mem.Impairment{Seed: 10, DropProb: 0.02}},
		{name: "late start", setup: func(o *harnessOpt) { o.r.StartNow = true }, data: mem.Impairment{Drop: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}},
		{name: "the sender silent, then heard again, then ended", end: true,
			data: mem.Impairment{Blackouts: []mem.Window{{From: int64(30 * ms), To: int64(1500 * ms)}}},
			naks: mem.Impairment{Blackouts: []mem.Window{{From: int64(30 * ms), To: int64(1500 * ms)}}}},
	} {
		for _, hold := range []bool{false, true} {
			name := tc.name
			if hold {
				name += ", HoldStatus"
			}
			t.Run(name, func(t *testing.T) {
				run := func(batched bool) *harness {
					o := defaultOpt()
					o.s.ID, o.r.ID = 42, 43 // else random: the two runs must be alike
					if tc.setup != nil {
						tc.setup(&o)
					}
					h := newHarness(t, o)
					h.rOut = batch.New(4096, 2048) // never full: no flush inside a batch either way
					h.batchedRecv, h.holdStatus, h.tracing = batched, hold, true
					if tc.slow {
						h.queueCap, h.autoConsume = 100, 20
					}
					h.impairData(tc.data)
					h.impairNaks(tc.naks)
					rng := rand.New(rand.NewPCG(3, 4))
					for i := 0; i < 60; i++ {
						h.send(1 + rng.IntN(200))
						h.run(time.Duration(rng.IntN(3))*ms, 100*us)
					}
					h.run(2000*ms, ms)
					if tc.end {
						h.s.End(h.now(), h.sOut)
						h.flushSender()
						h.run(100*ms, ms)
					}
					if h.orderError != nil {
						t.Fatal(h.orderError)
					}
					return h
				}
				a, b := run(false), run(true)
				for _, tr := range []struct {
					what string
					x, y [][]byte
				}{{"receiver", a.rtrace, b.rtrace}, {"sender", a.trace, b.trace}} {
					if len(tr.x) != len(tr.y) {
						t.Fatalf("the %s sent %d datagrams with Handle, %d with HandleRun", tr.what, len(tr.x), len(tr.y))
					}
					for i := range tr.x {
						if !bytes.Equal(tr.x[i], tr.y[i]) {
							t.Fatalf("the %s's datagram %d differs:\nHandle    %x\nHandleRun %x", tr.what, i, tr.x[i], tr.y[i])
						}
					}
				}
				if a.r.Stats() != b.r.Stats() || a.r.Outcome() != b.r.Outcome() || a.delivered != b.delivered || a.lastSeq != b.lastSeq {
					t.Fatalf("Handle: %+v %+v delivered %d\nHandleRun: %+v %+v delivered %d",
						a.r.Stats(), a.r.Outcome(), a.delivered, b.r.Stats(), b.r.Outcome(), b.delivered)
				}
				evs := func(h *harness) (es []ReceiverEvent) {
					for e, ok := h.r.NextEvent(); ok; e, ok = h.r.NextEvent() {
						es = append(es, e)
					}
					return es
				}
				if ea, eb := evs(a), evs(b); !slices.Equal(ea, eb) {
					t.Fatalf("receiver events: Handle %+v\nHandleRun %+v", ea, eb)
				}
				if len(a.rtrace) == 0 || a.delivered == 0 {
					t.Fatal("the script exercised nothing")
				}
			})
		}
	}
}

// TestHandleRunAfterSilence: the first records after the sender fell
// silent go through Handle's full path (PeerHeard), whether they come
// through HandleRun or a Handle each.
func TestHandleRunAfterSilence(t *testing.T) {
	type result struct {
		events []ReceiverEvent
		stats  ReceiverStats
		silent bool
	}
	run := func(batched bool) result {
		c := DefaultReceiverConfig()
		c.Sender, c.ID = mem.AddrA, 43
		r, err := NewReceiver(c)
		if err != nil {
			t.Fatal(err)
		}
		out, in := batch.New(64, 2048), batch.New(64, 2048)
		feed := func(from, to uint64, now int64) {
			in.Reset()
			for s := from; s <= to; s++ {
				in.Append(frame(s, 128), mem.AddrA)
			}
			if batched {
				r.HandleRun(in, 0, in.Len(), now, out, func(wire.Header, []byte) {})
				return
			}
			for i := 0; i < in.Len(); i++ {
				d, _ := in.Msg(i)
				r.Handle(d, now, out, func(wire.Header, []byte) {})
			}
		}
		feed(1, 10, 1)
		now := int64(1)
		for !r.PeerSilent() {
			now += int64(ms)
			r.Tick(now, out)
			out.Reset()
			if now > int64(time.Minute) {
				t.Fatal("never silent")
			}
		}
		feed(11, 20, now+1)
		var res result
		for e, ok := r.NextEvent(); ok; e, ok = r.NextEvent() {
			res.events = append(res.events, e)
		}
		res.stats, res.silent = r.Stats(), r.PeerSilent()
		return res
	}
	a, b := run(false), run(true)
	if !slices.Equal(a.events, b.events) || a.stats != b.stats || a.silent != b.silent || a.silent || a.stats.Delivered != 20 {
		t.Fatalf("Handle: %+v\nHandleRun: %+v", a, b)
	}
}

// TestHandleRunAllocs: the batch receive path allocates nothing.
func TestHandleRunAllocs(t *testing.T) {
	c := DefaultReceiverConfig()
	c.Sender = mem.AddrA
	r, err := NewReceiver(c)
	if err != nil {
		t.Fatal(err)
	}
	out, in := batch.New(64, 2048), batch.New(64, 2048)
	fs := make([][]byte, 64)
	for i := range fs {
		fs[i] = frame(0, 128)
	}
	seq := uint64(1)
	deliver := func(wire.Header, []byte) {}
	allocs := testing.AllocsPerRun(100, func() {
		in.Reset()
		out.Reset()
		for _, f := range fs {
			le.PutUint64(f[wire.HeaderSize:], seq)
			_ = wire.Seal(f, 100)
			in.AppendView(f, mem.AddrA)
			seq++
		}
		r.HoldStatus()
		r.HandleRun(in, 0, in.Len(), int64(seq), out, deliver)
		r.ReleaseStatus(int64(seq), out)
	})
	if allocs != 0 || r.Stats().Delivered != seq-1 {
		t.Fatalf("HandleRun: %.1f allocations a batch; delivered %d of %d", allocs, r.Stats().Delivered, seq-1)
	}
}
