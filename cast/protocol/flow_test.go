package protocol

import (
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
)

const us = time.Microsecond

// TestFlowScenarios are the negotiated behaviours (Status, flow control,
// probes, adaptive timers) on datapath/mem with the virtual clock.
func TestFlowScenarios(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(o *harnessOpt)
		run   func(t *testing.T, h *harness)
	}{
		{name: "negotiation: first Status turns flow control on, a probe follows at once", run: func(t *testing.T, h *harness) {
			h.send(1)
			h.step() // receiver: record 1, its first Status
			if _, limited := h.s.Limit(); limited {
				t.Fatal("limited before the Status reached the sender")
			}
			h.step() // sender: Status in (joined), probe out
			edge, limited := h.s.Limit()
			if !limited || edge != 1+uint64(DefaultReorderSlots) {
				t.Fatalf("limit %d %v, want %d", edge, limited, 1+DefaultReorderSlots)
			}
			if !slices.Equal(h.eventKinds(), []SenderEventKind{ReceiverJoined}) {
				t.Fatalf("events %v", h.eventKinds())
			}
			if h.s.Stats().Probes != 1 {
				t.Fatalf("probes %d, want 1", h.s.Stats().Probes)
			}
			h.step()
			if !h.r.SpeaksProbes() {
				t.Fatal("receiver did not hear the probe")
			}
			h.run(2*ms, 100*us) // the Status echoing it (within StatusInterval)
			if rtt := h.s.RTT(); rtt.Samples() < 1 {
				t.Fatalf("sender RTT samples %d", rtt.Samples())
			}
		}},
		{name: "window closes and opens; the sender never overruns the consumer",
			setup: func(o *harnessOpt) { o.r.ReorderSlots = 256 },
			run: func(t *testing.T, h *harness) {
				h.queueCap = 100
				h.send(1)
				h.run(2*ms, 100*us)
				// The consumer takes nothing: the sender is held at 100.
				for i := 0; i < 200; i++ {
					if h.sOut.Full() {
						h.flushSender()
					}
					if _, err := h.s.Send(100, h.payload, h.now(), h.sOut); err != nil {
						if err != ErrBackpressure {
							t.Fatal(err)
						}
						break
					}
					h.checkWindow()
					h.flushSender()
					h.step()
				}
				h.run(5*ms, 100*us)
				if h.s.NextSeq() != 101 || h.delivered != 100 {
					t.Fatalf("next seq %d delivered %d: want the sender held at the consumer's 100", h.s.NextSeq(), h.delivered)
				}
				if st := h.r.Stats(); st.Delivered != 100 {
					t.Fatalf("receiver %+v", st)
				}
				// The consumer drains: the window opens at once (one RTT, not
				// a Status interval or a heartbeat later).
				h.consume(100)
				h.step()
				h.step()
				if edge, _ := h.s.Limit(); edge != 200 {
					t.Fatalf("limit %d after the window opened, want 200", edge)
				}
				go1 := h.backpressured
				h.queueCap = 0 // unlimited from here
				h.r.SetConsumerRoom(UnlimitedRoom, h.now(), h.rOut)
				h.send(400)
				h.run(10*ms, 100*us)
				h.expectDelivered(1, 500)
				if h.overflows != 0 {
					t.Fatalf("%d records delivered into the full consumer queue", h.overflows)
				}
				if h.backpressured == go1 {
					t.Log("no backpressure after the consumer went unlimited (window 256 held)")
				}
			}},
		{name: "receiver disappears: dropped after ReceiverTimeout, sender runs unthrottled; reappears: joined again",
			setup: func(o *harnessOpt) { o.r.ReorderSlots = 64 },
			run: func(t *testing.T, h *harness) {
				h.send(10)
				h.run(5*ms, ms)
				id := h.r.ID()
				h.impairData(mem.Impairment{DropProb: 1})
				h.impairNaks(mem.Impairment{DropProb: 1}) // receiver gone both ways
				h.send(64)                                // up to the edge 10+64
				start := h.now()
				h.run(990*ms, ms)
				if _, limited := h.s.Limit(); !limited {
					t.Fatal("unthrottled before the timeout")
				}
				h.run(20*ms, ms)
				if _, limited := h.s.Limit(); limited {
					t.Fatalf("still limited %v after the receiver went silent", time.Duration(h.now()-start))
				}
				if k := h.eventKinds(); !slices.Equal(k, []SenderEventKind{ReceiverJoined, ReceiverLost}) || h.events[1].Receiver.ID != id {
					t.Fatalf("events %v", k)
				}
				h.send(500) // unthrottled: never held
				h.impairData(mem.Impairment{})
				h.impairNaks(mem.Impairment{})
				h.run(300*ms, ms)
				if k := h.eventKinds(); len(k) != 3 || k[2] != ReceiverJoined {
					t.Fatalf("events %v after it came back", k)
				}
				if _, limited := h.s.Limit(); !limited {
					t.Fatal("not limited again")
				}
			}},
		{name: "receiver that makes no progress (data path cut, Status flowing) is released after ReceiverTimeout",
			setup: func(o *harnessOpt) { o.r.ReorderSlots = 64 },
			run: func(t *testing.T, h *harness) {
				h.send(10)
				h.run(5*ms, ms)
				h.impairData(mem.Impairment{DropProb: 1}) // its Status still arrives
				for i := 0; i < 64; i++ {
					h.s.Send(100, h.payload, h.now(), h.sOut)
				}
				h.flushSender()
				start := h.now()
				var released int64
				for h.now()-start < int64(2*time.Second) && released == 0 {
					if _, err := h.s.Send(100, h.payload, h.now(), h.sOut); err == nil {
						released = h.now() - start
					}
					h.flushSender()
					h.step()
					h.p.Clock.Advance(ms)
				}
				if released < int64(DefaultReceiverTimeout) || released > int64(DefaultReceiverTimeout)+int64(10*ms) {
					t.Fatalf("released after %v, want ReceiverTimeout", time.Duration(released))
				}
				if k := h.eventKinds(); !slices.Equal(k, []SenderEventKind{ReceiverJoined, ReceiverStalled}) {
					t.Fatalf("events %v", k)
				}
				if ri := h.receivers(); len(ri) != 1 || !ri[0].Stalled || ri[0].Throttles {
					t.Fatalf("table %+v", ri)
				}
				h.impairData(mem.Impairment{})
				h.send(10) // the probes and data reach it again: it repairs by NAK and progresses
				h.run(500*ms, ms)
				if k := h.eventKinds(); k[len(k)-1] != ReceiverRecovered {
					t.Fatalf("events %v", k)
				}
				h.expectDelivered(1, h.s.NextSeq()-1)
			}},
		{name: "receiver repairing a gap for longer than ReceiverTimeout is not released",
			setup: func(o *harnessOpt) { o.r.ReorderSlots = 64 },
			run: func(t *testing.T, h *harness) {
				h.send(10)
				h.run(5*ms, ms)
				// Seq 11 and its retransmits are lost for 1.5 s (a loaded
				// machine that did not run one side looks the same to the
				// protocol); everything else arrives.
				until := h.now() + int64(1500*ms)
				drop11 := dropSeqs(-1, 11)
				h.impairData(mem.Impairment{Script: func(i int, b []byte) mem.Action {
					if h.now() < until {
						return drop11(i, b)
					}
					return mem.Pass
				}})
				start := h.now()
				sent := 0
				for h.now()-start < int64(2*time.Second) {
					if _, err := h.s.Send(100, h.payload, h.now(), h.sOut); err == nil {
						sent++
					}
					h.flushSender()
					h.step()
					h.p.Clock.Advance(ms)
				}
				for _, k := range h.eventKinds() {
					if k == ReceiverStalled || k == ReceiverFaulted {
						t.Fatalf("events %v: a receiver still repairing was released", h.eventKinds())
					}
				}
				if o := h.r.Outcome(); o.Kind != Live {
					t.Fatalf("outcome %+v", o)
				}
				h.run(100*ms, ms)
				h.expectDelivered(1, h.s.NextSeq()-1)
				if sent <= 64 {
					t.Fatalf("sent %d after the repair, want the stream to go on", sent)
				}
			}},
		{name: "receiver restarts with a new id: replaced at once, the new one throttles",
			run: func(t *testing.T, h *harness) {
				h.send(10)
				h.run(5*ms, ms)
				old := h.r.ID()
				r, err := NewReceiver(h.r.cfg) // same address, new id
				if err != nil {
					t.Fatal(err)
				}
				h.r = r
				h.r.ResetAfterReplay(10)
				h.send(5)
				h.run(3*ms, ms)
				k := h.eventKinds()
				if !slices.Equal(k, []SenderEventKind{ReceiverJoined, ReceiverRestarted}) {
					t.Fatalf("events %v", k)
				}
				if e := h.events[1]; e.PrevID != old || e.Receiver.ID != h.r.ID() {
					t.Fatalf("restart event %+v", e)
				}
				if ri := h.receivers(); len(ri) != 1 || ri[0].ID != h.r.ID() || !ri[0].Throttles {
					t.Fatalf("table %+v", ri)
				}
			}},
		{name: "receiver leaves: dropped at once",
			run: func(t *testing.T, h *harness) {
				h.send(10)
				h.run(3*ms, ms)
				h.r.Leave(h.now(), h.rOut)
				h.flushReceiver()
				h.step()
				if k := h.eventKinds(); !slices.Equal(k, []SenderEventKind{ReceiverJoined, ReceiverLeft}) || h.events[1].Receiver.Delivered != 10 {
					t.Fatalf("events %v %+v", k, h.events)
				}
				if _, limited := h.s.Limit(); limited {
					t.Fatal("still limited")
				}
			}},
		{name: "receiver faults: the sender is told and stops throttling",
			setup: func(o *harnessOpt) { o.r.MaxNakRetries = 2; o.r.ReorderSlots = 64 },
			run: func(t *testing.T, h *harness) {
				h.send(10)
				h.run(3*ms, ms)
				h.impairData(mem.Impairment{Script: dropSeqs(-1, 11)})
				h.send(20)
				h.run(200*ms, ms)
				if h.r.Outcome().Kind != Faulted {
					t.Fatalf("outcome %+v", h.r.Outcome())
				}
				k := h.eventKinds()
				if len(k) != 2 || k[1] != ReceiverFaulted || h.events[1].Receiver.State != Faulted {
					t.Fatalf("events %v", k)
				}
				if _, limited := h.s.Limit(); limited {
					t.Fatal("a faulted receiver still throttles")
				}
				h.send(200) // never held
				h.replay()
				h.run(5*ms, ms)
				if k := h.eventKinds(); k[len(k)-1] != ReceiverRecovered {
					t.Fatalf("events %v after replay and reset", k)
				}
				h.send(5)
				h.run(5*ms, ms)
				h.expectDelivered(1, 235)
			}},
		{name: "lost tail: probed and repaired within a few RTTs",
			run: func(t *testing.T, h *harness) {
				lat := 50 * us
				h.impairData(mem.Impairment{Latency: lat})
				h.impairNaks(mem.Impairment{Latency: lat})
				h.trackTimes = true
				h.send(20)
				h.run(30*ms, 10*us) // negotiate, RTT samples
				h.impairData(mem.Impairment{Latency: lat, Script: dropSeqs(1, 25)})
				sent := h.now()
				h.send(5) // 21..25, 25 lost
				h.run(5*ms, 10*us)
				h.expectDelivered(1, 25)
				took := time.Duration(h.deliveredAt[24] - sent)
				if took > 10*lat*2 {
					t.Fatalf("lost tail delivered after %v (RTT %v)", took, 2*lat)
				}
				if h.s.Stats().TailProbes == 0 {
					t.Fatal("no tail probe")
				}
				t.Logf("lost tail delivered %v after it was sent (RTT %v)", took, 2*lat)
			}},
		{name: "lost retransmit: re-NAKed after the adaptive delay, not NakDebounce",
			run: func(t *testing.T, h *harness) {
				lat := 50 * us
				h.impairData(mem.Impairment{Latency: lat})
				h.impairNaks(mem.Impairment{Latency: lat})
				h.trackTimes = true
				h.send(20)
				h.run(30*ms, 10*us)
				h.impairData(mem.Impairment{Latency: lat, Script: dropSeqs(2, 23)}) // the record and its first retransmit
				sent := h.now()
				h.send(10)
				h.run(10*ms, 10*us)
				h.expectDelivered(1, 30)
				took := time.Duration(h.deliveredAt[22] - sent)
				if took > 2*time.Millisecond {
					t.Fatalf("twice-lost record delivered after %v", took)
				}
				if d := h.r.NakDelay(); d < int64(DefaultNakFloor) || d > int64(time.Millisecond) {
					t.Fatalf("re-NAK delay %v", time.Duration(d))
				}
				t.Logf("record lost twice delivered %v after it was sent; re-NAK delay %v", took, time.Duration(h.r.NakDelay()))
			}},
		{name: "RTT changes mid-stream: both estimates and the timers follow",
			run: func(t *testing.T, h *harness) {
				set := func(lat time.Duration, seed uint64) {
					h.impairData(mem.Impairment{Latency: lat, Seed: seed, DropProb: 0.05})
					h.impairNaks(mem.Impairment{Latency: lat})
				}
				stream := func(d time.Duration) {
					for end := h.now() + int64(d); h.now() < end; {
						h.send(1)
						h.step()
						h.p.Clock.Advance(100 * us)
					}
				}
				set(50*us, 1)
				stream(300 * ms)
				s1, r1, d1 := h.s.RTT().SRTT(), h.r.RTT().SRTT(), h.r.NakDelay()
				set(2*ms, 2)
				stream(500 * ms)
				s2, r2, d2 := h.s.RTT().SRTT(), h.r.RTT().SRTT(), h.r.NakDelay()
				t.Logf("srtt sender %v → %v, receiver %v → %v, re-NAK %v → %v",
					time.Duration(s1), time.Duration(s2), time.Duration(r1), time.Duration(r2), time.Duration(d1), time.Duration(d2))
				if s1 < int64(100*us) || s1 > int64(400*us) || s2 < int64(3*ms) || s2 > int64(6*ms) {
					t.Fatalf("sender srtt %v then %v for RTT 100 µs then 4 ms", time.Duration(s1), time.Duration(s2))
				}
				if r2 < int64(3*ms) || d2 <= d1 || d2 < int64(4*ms) {
					t.Fatalf("receiver srtt %v, re-NAK %v → %v", time.Duration(r2), time.Duration(d1), time.Duration(d2))
				}
				// The sender's dedup window stays below the re-NAK delay.
				if ri := h.receivers(); len(ri) != 1 || h.s.retx.dedup >= ri[0].ReNak {
					t.Fatalf("dedup %v, receiver re-NAK %v", time.Duration(h.s.retx.dedup), ri)
				}
				h.run(time.Second, ms)
				h.expectDelivered(1, h.s.NextSeq()-1)
			}},
		{name: "a forged heartbeat far ahead is not fatal",
			run: func(t *testing.T, h *harness) {
				h.send(10)
				h.run(20*ms, ms)
				forged := batch.New(1, 128)
				f := hbFrame(1 << 62)
				forged.Append(f, mem.AddrB)
				if _, err := h.p.A.Send(forged); err != nil {
					t.Fatal(err)
				}
				h.run(5*ms, 100*us)
				h.send(10)
				h.run(2*time.Second, ms)
				h.expectDelivered(1, 20)
				if o := h.r.Outcome(); o.Kind != Live || h.r.HighestSeen() != 20 || h.r.Stats().Lowered == 0 {
					t.Fatalf("outcome %+v highest %d stats %+v", o, h.r.HighestSeen(), h.r.Stats())
				}
			}},
		{name: "an idle stream sends no probes beyond the heartbeat",
			run: func(t *testing.T, h *harness) {
				h.send(5)
				h.run(50*ms, ms)
				p0, st0 := h.s.Stats().Probes, h.r.Stats().StatusSent
				h.run(time.Second, 100*us)
				if p := h.s.Stats().Probes - p0; p < 9 || p > 11 {
					t.Fatalf("%d probes in an idle second, want the 10 heartbeats", p)
				}
				if s := h.r.Stats().StatusSent - st0; s < 9 || s > 12 {
					t.Fatalf("%d Status in an idle second, want ~10", s)
				}
			}},
		{name: "a busy stream sends no tail probes",
			run: func(t *testing.T, h *harness) {
				h.impairData(mem.Impairment{Latency: 20 * us})
				h.impairNaks(mem.Impairment{Latency: 20 * us})
				for i := 0; i < 20000; i++ { // 200 ms at 100 k records/s
					h.send(1)
					h.step()
					h.p.Clock.Advance(10 * us)
				}
				st := h.s.Stats()
				if st.TailProbes > 5 || st.RTTProbes < 15 || st.RTTProbes > 25 {
					t.Fatalf("tail probes %d, RTT probes %d in 200 ms of 100 k records/s", st.TailProbes, st.RTTProbes)
				}
				if s := h.r.Stats().StatusSent; s < 150 || s > 450 {
					t.Fatalf("%d Status in 200 ms", s)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOpt()
			if tc.setup != nil {
				tc.setup(&o)
			}
			tc.run(t, newHarness(t, o))
		})
	}
}
