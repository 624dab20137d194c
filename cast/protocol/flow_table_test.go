package protocol

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// checkTable fails unless the flow-control table keeps its invariants:
// active counts the used slots, every used slot lies below hi, and slot
// hi−1 is used (the scans stop at hi, so a used slot above it would
// never throttle, time out or be listed).
func checkTable(t *testing.T, fc *flowController, step int) {
	t.Helper()
	used, top := 0, 0
	for i := range fc.rcv {
		if fc.rcv[i].used {
			used++
			top = i + 1
		}
	}
	if used != fc.active || top != fc.hi {
		t.Fatalf("step %d: %d used slots, highest %d; active %d, hi %d", step, used, top, fc.active, fc.hi)
	}
}

// The table's scans stop at hi, the top used slot: through joins,
// restarts, departures, evictions of unproven receivers from a full
// table and timeouts in random order, hi stays exact, every receiver
// in the table is listed, and the receivers that throttle set the limit.
func TestFlowTableTop(t *testing.T) {
	cfg := senderCfg()
	cfg.AcceptAnyNakSource = true // Status from many addresses
	cfg.MaxReceivers = 8
	cfg.ReceiverTimeout = 50 * time.Millisecond
	s, out := newTestSender(t, cfg, nil)
	sendN(t, s, out, 10)
	out.Reset()
	rng := rand.New(rand.NewPCG(7, 8))
	serial := map[uint64]uint32{}
	now := int64(1_000_000)
	b := make([]byte, wire.ControlFrameSize)
	highs := 0
	for step := range 20000 {
		now += int64(rng.IntN(int(time.Millisecond)))
		switch k := rng.IntN(20); {
		case k == 0:
			// Silence: every receiver not heard for ReceiverTimeout goes.
			now += int64(cfg.ReceiverTimeout)
			s.Tick(now, out)
		default:
			// 12 addresses for 8 slots; ids restart now and then.
			a := rng.IntN(12)
			id := uint64(a)<<8 | uint64(rng.IntN(2))
			serial[id]++
			flags := wire.StatusSynced
			if rng.IntN(6) == 0 {
				flags |= wire.StatusClosing
			}
			edge := uint64(10 + rng.IntN(100))
			wire.PutStatusFrame(b, wire.Status{Delivered: 10, Highest: 10, ReceiverID: id, Window: uint32(edge - 10),
				Serial: serial[id], Flags: flags})
			s.Handle(b, netipPort(a+1), now, out)
		}
		out.Reset()
		checkTable(t, &s.fc, step)
		if s.fc.hi > 1 && !s.fc.rcv[0].used {
			highs++ // a receiver above a free slot: the case hi is for
		}
		rs := make([]ReceiverInfo, cfg.MaxReceivers)
		if n := s.Receivers(rs); n != s.fc.active {
			t.Fatalf("step %d: Receivers lists %d of %d", step, n, s.fc.active)
		}
		// The limit is the lowest edge among those that throttle: each
		// of them counted, wherever its slot.
		var want uint64
		limited := false
		for i := range s.fc.rcv {
			if r := &s.fc.rcv[i]; r.used && r.info.Throttles {
				e := s.fc.repairableEdge(&r.info)
				if !limited || e < want {
					want = e
				}
				limited = true
			}
		}
		if edge, ok := s.Limit(); ok != limited || ok && edge != want {
			t.Fatalf("step %d: Limit %d, %v; want %d, %v", step, edge, ok, want, limited)
		}
	}
	// None echoes a probe, so a newcomer always finds a slot: a free
	// one, else an unproven receiver's.
	if st := s.Stats(); st.StatusRejected != 0 {
		t.Fatalf("%d Status frames rejected", st.StatusRejected)
	}
	if st := s.Stats(); st.ReceiversEvicted == 0 || st.ReceiversLost == st.ReceiversEvicted {
		t.Fatalf("evicted %d, lost %d: the test reaches neither a full table or a timeout", st.ReceiversEvicted, st.ReceiversLost)
	}
	if s.Stats().Statuses < 10000 || highs < 100 {
		t.Fatalf("%d Status frames taken, %d steps with a receiver above a free slot: the test does not reach the case", s.Stats().Statuses, highs)
	}
}

// BenchmarkSenderDeadline is what a loop asks its Sender after every
// busy iteration (Deadline) and on every tick (Tick), with two receivers
// in a table of the default size and in one of MaxReceivers slots (what
// cast send gives a multicast group, a slot for every member).
func BenchmarkSenderDeadline(b *testing.B) {
	for _, slots := range []int{DefaultMaxReceivers, MaxReceivers} {
		cfg := senderCfg()
		cfg.AcceptAnyNakSource = true
		cfg.MaxReceivers = slots
		s, out := newTestSender(b, cfg, nil)
		sendN(b, s, out, 10)
		out.Reset()
		feed := statusFeed{s: s, out: out}
		now := int64(1_000_000)
		feed.send(1, netipPort(1), 0, now)
		feed.send(2, netipPort(2), 0, now)
		s.Tick(now, out) // the probes the joins owe
		out.Reset()
		if s.fc.active != 2 || s.Deadline() <= now {
			b.Fatalf("%d receivers, deadline %d at %d", s.fc.active, s.Deadline(), now)
		}
		b.Run(strconv.Itoa(slots), func(b *testing.B) {
			b.ReportAllocs()
			var d int64
			for b.Loop() {
				d += s.Deadline()
			}
			_ = d
		})
		b.Run(strconv.Itoa(slots)+"/tick", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Tick(now, out)
				out.Reset()
			}
		})
	}
}
