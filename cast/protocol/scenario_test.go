package protocol

import (
	"testing"
	"time"

	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

const ms = time.Millisecond

// TestScenarios are the table-driven protocol scenarios on datapath/mem
// with the virtual clock (spec §9 UDP part). Each runs twice
// unless marked: between reference peers (the receiver sends no Status,
// so nothing is negotiated) and between walcast peers (Status, probes,
// flow control, adaptive timers); refOnly marks expectations that hold
// for the reference's fixed timers only. The negotiated behaviour has
// its own scenarios in TestFlowScenarios.
func TestScenarios(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refOnly bool
		setup   func(o *harnessOpt)
		run     func(t *testing.T, h *harness)
	}{
		{name: "in order", run: func(t *testing.T, h *harness) {
			if h.r.ExpectedSeq() != 1 {
				t.Fatalf("expected seq before first record = %d, want 1 (the stream's first)", h.r.ExpectedSeq())
			}
			if h.s.NextSeq() != 1 {
				t.Fatalf("next seq = %d, want 1", h.s.NextSeq())
			}
			h.send(1)
			if h.s.NextSeq() != 2 {
				t.Fatalf("next seq after one send = %d, want 2", h.s.NextSeq())
			}
			h.step()
			if h.r.ExpectedSeq() != 2 {
				t.Fatalf("expected seq after seq 1 = %d, want 2", h.r.ExpectedSeq())
			}
			h.send(4)
			h.run(10*ms, ms)
			h.expectDelivered(1, 5)
			if st := h.r.Stats(); st.NaksSent != 0 || st.Buffered != 0 {
				t.Fatalf("clean link sent NAKs or buffered: %+v", st)
			}
		}},
		{name: "duplicates", run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{DupProb: 1})
			h.send(5)
			h.run(10*ms, ms)
			h.expectDelivered(1, 5)
			if d := h.r.Stats().Duplicates; d != 5 {
				t.Fatalf("duplicates = %d, want 5", d)
			}
		}},
		{name: "bad CRC then repair", run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{Script: func(i int, b []byte) mem.Action {
				if i == 2 {
					return mem.Corrupt
				}
				return mem.Pass
			}})
			h.send(5)
			h.run(10*ms, ms)
			h.expectDelivered(1, 5)
			st := h.r.Stats()
			if st.Bad.Total() != 1 || st.NaksSent != 1 || h.s.Stats().RetxHot != 1 {
				t.Fatalf("want one bad datagram, one NAK, one retransmit: recv %+v send %+v", st, h.s.Stats())
			}
		}},
		{name: "data-driven gap", run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{Drop: []int{2}})
			h.send(5)
			h.step() // receiver sees 1,2,4,5 and NAKs 3 at once
			if n := h.r.Stats().NaksSent; n != 1 {
				t.Fatalf("NAKs after gap = %d, want 1", n)
			}
			h.run(5*ms, ms)
			h.expectDelivered(1, 5)
		}},
		{name: "heartbeat-driven tail gap", refOnly: true, run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{Drop: []int{4}})
			h.send(5)
			h.run(50*ms, ms)
			h.expectDelivered(1, 4)
			h.run(100*ms, ms) // idle: the heartbeat announces 5
			h.expectDelivered(1, 5)
			if h.r.Stats().Heartbeats == 0 {
				t.Fatal("no heartbeat seen")
			}
		}},
		{name: "gap re-requested by the clock with no traffic",
			setup: func(o *harnessOpt) { o.s.HeartbeatInterval = time.Hour },
			run: func(t *testing.T, h *harness) {
				h.send(1) // the first Tick's heartbeat goes out now, then none for an hour
				h.step()
				h.impairData(mem.Impairment{Script: dropSeqs(2, 3)})
				h.send(4)
				h.run(40*ms, ms)
				if n := h.r.Stats().NaksSent; n != 1 {
					t.Fatalf("NAKs within the debounce = %d, want 1", n)
				}
				h.run(20*ms, ms) // only the receiver's clock runs: it re-NAKs at 50 ms
				h.expectDelivered(1, 5)
				if n := h.r.Stats().NaksSent; n != 2 {
					t.Fatalf("NAKs = %d, want 2", n)
				}
			}},
		{name: "debounce", refOnly: true, run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{Script: dropSeqs(-1, 3)})
			h.send(5)
			h.run(201*ms, 100*time.Microsecond) // NAKs at 0, 50, 100, 150, 200 ms
			if n := h.r.Stats().NaksSent; n != 5 {
				t.Fatalf("NAKs in 201 ms with 50 ms debounce = %d, want 5", n)
			}
		}},
		{name: "retry budget faults with the gap", run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{Script: dropSeqs(-1, 3)})
			h.send(5)
			// Against a sender that speaks probes only the re-NAKs after
			// which it was heard count: here its idle heartbeats (100 ms),
			// so the budget lasts about MaxNakRetries heartbeats.
			negotiated := !h.r.cfg.NoStatus
			budget := 2 * time.Second
			if negotiated {
				budget = time.Duration(DefaultMaxNakRetries+2) * time.Duration(DefaultHeartbeatInterval)
			}
			h.run(budget, ms)
			o := h.r.Outcome()
			want := Outcome{Kind: Faulted, Cause: RetryBudget, LastDelivered: 2, GapStart: 3, GapEnd: 3}
			if o != want {
				t.Fatalf("outcome %+v, want %+v", o, want)
			}
			if n := h.r.Stats().NaksSent; !negotiated && n != uint64(DefaultMaxNakRetries)+1 || negotiated && n <= uint64(DefaultMaxNakRetries)+1 {
				t.Fatalf("NAKs = %d, want %d (negotiated: more, the uncounted ones too)", n, DefaultMaxNakRetries+1)
			}
			h.expectDelivered(1, 2)
		}},
		{name: "a sender unheard for less than the silence time spends no retry budget",
			setup: func(o *harnessOpt) { o.r.SilenceIntervals = 30 },
			run: func(t *testing.T, h *harness) {
				// A loaded machine may not run the sender for a second or
				// more; a NAK it never answered because it never ran is no
				// evidence that the gap cannot be repaired.
				h.impairData(mem.Impairment{Script: dropSeqs(-1, 3)})
				h.send(5)
				h.run(30*ms, ms)                          // a probe: the sender speaks them
				h.impairData(mem.Impairment{DropProb: 1}) // the sender goes dark
				h.run(2*time.Second, ms)
				h.impairData(mem.Impairment{})
				h.run(200*ms, ms)
				negotiated := !h.r.cfg.NoStatus
				if o := h.r.Outcome(); negotiated && o.Kind != Live || !negotiated && o.Cause != RetryBudget {
					t.Fatalf("outcome %+v, want live (reference: the retry budget faults)", o)
				}
				if negotiated {
					if n := h.r.Stats().NaksSent; n <= uint64(DefaultMaxNakRetries)+1 {
						t.Fatalf("NAKs = %d, want more than the budget of %d", n, DefaultMaxNakRetries)
					}
					h.expectDelivered(1, 5)
				}
			}},
		{name: "silence with a gap faults",
			setup: func(o *harnessOpt) { o.r.MaxNakRetries = 1000 },
			run: func(t *testing.T, h *harness) {
				h.impairData(mem.Impairment{Script: dropSeqs(-1, 3)})
				h.send(5)
				h.step()
				h.impairData(mem.Impairment{DropProb: 1}) // the sender goes dark
				h.run(999*ms, ms)
				if o := h.r.Outcome(); o.Kind != Live {
					t.Fatalf("faulted before the silence time: %+v", o)
				}
				h.run(2*ms, ms)
				want := Outcome{Kind: Faulted, Cause: Silence, LastDelivered: 2, GapStart: 3, GapEnd: 3}
				if o := h.r.Outcome(); o != want {
					t.Fatalf("outcome %+v, want %+v", o, want)
				}
			}},
		{name: "silence without a gap is a non-sticky event", run: func(t *testing.T, h *harness) {
			h.send(3)
			h.step()
			h.impairData(mem.Impairment{DropProb: 1})
			h.run(1100*ms, ms)
			if !h.r.PeerSilent() || h.r.Outcome().Kind != Live || h.r.Stats().PeerSilences != 1 {
				t.Fatalf("silent=%v outcome=%+v stats=%+v", h.r.PeerSilent(), h.r.Outcome(), h.r.Stats())
			}
			h.impairData(mem.Impairment{})
			h.send(1)
			h.step()
			if h.r.PeerSilent() {
				t.Fatal("still silent after data")
			}
			h.expectDelivered(1, 4)
		}},
		{name: "a sender that keeps outrunning the window reconnects", refOnly: true,
			setup: func(o *harnessOpt) { o.r.ReorderSlots = 16 },
			run: func(t *testing.T, h *harness) {
				h.impairData(mem.Impairment{Script: dropSeqs(-1, 2)})
				h.send(17) // 17 − 2 = 15 < 16: buffered
				h.step()
				if o := h.r.Outcome(); o.Kind != Live {
					t.Fatalf("outcome %+v before the window is exceeded", o)
				}
				h.send(1) // 18 − 2 = 16: beyond the window, dropped, no Reconnect yet
				h.step()
				if o := h.r.Outcome(); o.Kind != Live || h.r.Stats().OutOfWindow != 1 {
					t.Fatalf("one datagram beyond the window: outcome %+v, stats %+v", o, h.r.Stats())
				}
				// One datagram per ms beyond the window: the evidence needs
				// OverrunEvidence (64) datagrams over NakDebounce (50 ms).
				for i := 0; i < 62; i++ {
					h.send(1)
					h.step()
					h.p.Clock.Advance(ms)
				}
				if o := h.r.Outcome(); o.Kind != Live {
					t.Fatalf("Reconnect after 63 datagrams: %+v", o)
				}
				h.send(1)
				h.step()
				want := Outcome{Kind: Reconnect, LastDelivered: 1, Seq: 81}
				if o := h.r.Outcome(); o != want {
					t.Fatalf("outcome %+v, want %+v", o, want)
				}
			}},
		{name: "reset then quiet idle stream", run: func(t *testing.T, h *harness) {
			h.send(5)
			h.step()
			h.r.ResetAfterReplay(5)
			naks := h.r.Stats().NaksSent
			h.run(3*time.Second, ms)
			if h.r.Stats().NaksSent != naks || h.r.Outcome().Kind != Live {
				t.Fatalf("idle stream after reset: NAKs %d → %d, outcome %+v", naks, h.r.Stats().NaksSent, h.r.Outcome())
			}
			h.send(1)
			h.step()
			h.expectDelivered(1, 6)
		}},
		{name: "several gaps recovered in parallel", run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{Drop: []int{10, 20, 30, 40}})
			h.send(50)
			h.step()
			if n := h.r.Stats().NaksSent; n != 4 {
				t.Fatalf("NAKs in the first pass = %d, want 4 (one per run)", n)
			}
			h.step()
			h.expectDelivered(1, 50)
		}},
		{name: "lost NAK is repeated", run: func(t *testing.T, h *harness) {
			h.impairData(mem.Impairment{Drop: []int{2}})
			h.impairNaks(mem.Impairment{Drop: []int{0}})
			h.send(5)
			h.run(60*ms, ms)
			h.expectDelivered(1, 5)
		}},
		{name: "reorder without loss", run: func(t *testing.T, h *harness) {
			h.send(1) // the first record seen defines the start: keep it in place
			h.step()
			h.impairData(mem.Impairment{Seed: 7, ReorderProb: 0.3, ReorderBy: 3})
			h.send(199)
			h.run(100*ms, ms)
			h.expectDelivered(1, 200)
		}},
		{name: "cold read for a record evicted from the ring",
			setup: func(o *harnessOpt) { o.s.RingSlots = 64 },
			run: func(t *testing.T, h *harness) {
				h.r.ResetAfterReplay(0) // synced: expects seq 1
				h.impairData(mem.Impairment{Drop: []int{1, 2, 3}})
				h.impairNaks(mem.Impairment{DropProb: 1})
				h.send(100) // 2..4 lost, their first NAK too
				h.step()
				h.impairNaks(mem.Impairment{})
				h.run(60*ms, ms) // the re-NAK at 50 ms finds 2..4 evicted (ring of 64)
				h.expectDelivered(1, 100)
				if st := h.s.Stats(); st.RetxCold != 3 || st.ColdQueued != 1 || st.RetxHot != 0 {
					t.Fatalf("cold stats %+v", st)
				}
			}},
		{name: "coalesced datagrams",
			setup: func(o *harnessOpt) { o.s.Coalesce = true },
			run: func(t *testing.T, h *harness) {
				h.impairData(mem.Impairment{Seed: 3, DropProb: 0.1})
				h.send(500)
				h.run(500*ms, ms)
				h.expectDelivered(1, 500)
				if sent := h.p.Net.Stats(mem.AddrA, mem.AddrB).Sent; sent > 100 {
					t.Fatalf("%d datagrams for 500 coalesced records", sent)
				}
			}},
		{name: "blackout shorter than the window is repaired by one NAK", run: func(t *testing.T, h *harness) {
			h.send(1)
			h.step()
			from := h.now() + int64(10*ms)
			h.impairData(mem.Impairment{Blackouts: []mem.Window{{From: from, To: from + int64(300*ms)}}})
			for i := 0; i < 400; i++ { // one record per ms: 300 lost in the blackout
				h.send(1)
				h.step()
				h.p.Clock.Advance(ms)
			}
			h.run(10*ms, ms)
			h.expectDelivered(1, 401)
			if st := h.r.Stats(); st.NaksSent != 1 || st.NakSeqs != 300 {
				t.Fatalf("NAKs %d for %d seqs, want one NAK for 300", st.NaksSent, st.NakSeqs)
			}
		}},
		{name: "blackout longer than the window is repaired window by window", refOnly: true,
			setup: func(o *harnessOpt) { o.r.ReorderSlots = 256 },
			run: func(t *testing.T, h *harness) {
				h.send(1)
				h.step()
				from := h.now() + int64(10*ms)
				h.impairData(mem.Impairment{Blackouts: []mem.Window{{From: from, To: from + int64(300*ms)}}})
				for i := 0; i < 400; i++ { // 12..311 lost; 312 − 12 = 300 ≥ 256
					h.send(1)
					h.step()
					h.p.Clock.Advance(ms)
				}
				h.send(5)
				h.run(10*ms, ms)
				h.expectDelivered(1, 406)
				if st := h.r.Stats(); h.r.Outcome().Kind != Live || st.OutOfWindow == 0 {
					t.Fatalf("outcome %+v, stats %+v", h.r.Outcome(), st)
				}
			}},
		{name: "WAL-less sender",
			setup: func(o *harnessOpt) { o.noLog = true },
			run: func(t *testing.T, h *harness) {
				h.impairData(mem.Impairment{Seed: 1, DropProb: 0.2})
				h.send(300)
				h.run(time.Second, ms)
				h.expectDelivered(1, 300)
			}},
	} {
		for _, mode := range []string{"reference", "negotiated"} {
			if tc.refOnly && mode != "reference" {
				continue
			}
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				o := defaultOpt()
				o.r.NoStatus = mode != "negotiated"
				if tc.setup != nil {
					tc.setup(&o)
				}
				tc.run(t, newHarness(t, o))
			})
		}
	}
}

// frame builds one data frame of type 100 with the given seq.
func frame(seq uint64, n int) []byte {
	f := make([]byte, wire.HeaderSize+n)
	if n >= 8 {
		le.PutUint64(f[wire.HeaderSize:], seq)
	}
	_ = wire.Seal(f, 100)
	return f
}

func hbFrame(highest uint64) []byte {
	f := make([]byte, wire.ControlFrameSize)
	wire.PutHeartbeatFrame(f, wire.Heartbeat{Highest: highest})
	return f
}

func nakFrame(from, count uint64) []byte {
	f := make([]byte, wire.ControlFrameSize)
	wire.PutNakFrame(f, wire.Nak{From: from, Count: count})
	return f
}
