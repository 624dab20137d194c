package protocol

import (
	"errors"
	"testing"

	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// TestReceiverStart: a Receiver begins at a configured seq (default the
// stream's first) or at "now", never silently wherever its first datagram
// lands.
func TestReceiverStart(t *testing.T) {
	startAt := func(s uint64) ReceiverConfig { c := DefaultReceiverConfig(); c.Start = s; return c }
	now := func() ReceiverConfig { c := DefaultReceiverConfig(); c.StartNow = true; return c }
	for _, tc := range []struct {
		name   string
		cfg    ReceiverConfig
		feed   [][]byte
		want   []uint64   // delivered
		naks   []wire.Nak // sent, in order
		late   uint64
		reconn uint64 // Outcome.Seq of a Reconnect, 0 for Live
	}{
		{name: "default: seq 1 and 2 lost, 3 arrives first", cfg: DefaultReceiverConfig(),
			feed: [][]byte{frame(3, 64), frame(1, 64), frame(2, 64)}, want: []uint64{1, 2, 3}, naks: []wire.Nak{{From: 1, Count: 2}}},
		{name: "default: a heartbeat before any data announces what is missing", cfg: DefaultReceiverConfig(),
			feed: [][]byte{hbFrame(4)}, naks: []wire.Nak{{From: 1, Count: 4}}},
		{name: "default: an idle sender's heartbeat (highest 0) asks for nothing", cfg: DefaultReceiverConfig(),
			feed: [][]byte{hbFrame(0), frame(1, 64)}, want: []uint64{1}},
		{name: "default: one datagram a window ahead NAKs the window from the start (no single datagram reconnects)", cfg: DefaultReceiverConfig(),
			feed: [][]byte{frame(1+DefaultReorderSlots, 64)}, naks: []wire.Nak{{From: 1, Count: DefaultReorderSlots}}},
		{name: "Start 100: earlier records are not delivered, 100..101 are NAKed", cfg: startAt(100),
			feed: [][]byte{frame(99, 64), frame(102, 64), frame(100, 64), frame(101, 64)}, want: []uint64{100, 101, 102}, naks: []wire.Nak{{From: 100, Count: 2}}},
		{name: "StartNow: the first record heard is now, reported late", cfg: now(),
			feed: [][]byte{frame(7, 64), frame(9, 64), frame(8, 64)}, want: []uint64{7, 8, 9}, naks: []wire.Nak{{From: 8, Count: 1}}, late: 7},
		{name: "StartNow: a first heartbeat makes now its highest + 1", cfg: now(),
			feed: [][]byte{hbFrame(10), frame(12, 64), frame(11, 64)}, want: []uint64{11, 12}, naks: []wire.Nak{{From: 11, Count: 1}}, late: 11},
		{name: "StartNow at the stream's first record is not late", cfg: now(),
			feed: [][]byte{hbFrame(0), frame(1, 64)}, want: []uint64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newRecvDirect(t, tc.cfg)
			var naks []wire.Nak
			for _, f := range tc.feed {
				d.feed(0, f)
				naks = append(naks, d.naks()...)
			}
			if len(d.seqs) != len(tc.want) {
				t.Fatalf("delivered %v, want %v", d.seqs, tc.want)
			}
			for i := range tc.want {
				if d.seqs[i] != tc.want[i] {
					t.Fatalf("delivered %v, want %v", d.seqs, tc.want)
				}
			}
			if len(naks) != len(tc.naks) {
				t.Fatalf("NAKs %+v, want %+v", naks, tc.naks)
			}
			for i := range tc.naks {
				if naks[i] != tc.naks[i] {
					t.Fatalf("NAKs %+v, want %+v", naks, tc.naks)
				}
			}
			if d.r.LateStart() != tc.late {
				t.Fatalf("LateStart %d, want %d", d.r.LateStart(), tc.late)
			}
			if o := d.r.Outcome(); tc.reconn != 0 && (o.Kind != Reconnect || o.Seq != tc.reconn || o.LastDelivered != 0) || tc.reconn == 0 && o.Kind != Live {
				t.Fatalf("outcome %+v", o)
			}
		})
	}
	t.Run("default: a stream that keeps running a window ahead reconnects from the start", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		for i := 0; i < DefaultOverrunEvidence; i++ { // one a ms: 64 datagrams over more than NakDebounce
			d.feed(int64(i)*int64(ms), frame(1+DefaultReorderSlots+uint64(i), 64))
		}
		if o := d.r.Outcome(); o.Kind != Reconnect || o.LastDelivered != 0 || o.Seq != uint64(DefaultReorderSlots+DefaultOverrunEvidence) {
			t.Fatalf("outcome %+v", o)
		}
	})
	t.Run("Resync goes back to the configured start", func(t *testing.T) {
		d := newRecvDirect(t, startAt(5))
		d.feed(0, frame(5, 64))
		d.r.Resync()
		if d.r.ExpectedSeq() != 5 || d.r.LateStart() != 0 {
			t.Fatalf("after Resync: expected %d late %d", d.r.ExpectedSeq(), d.r.LateStart())
		}
		n := newRecvDirect(t, now())
		n.feed(0, frame(50, 64))
		n.r.Resync()
		if n.r.ExpectedSeq() != 0 || n.r.LateStart() != 0 {
			t.Fatalf("StartNow after Resync: expected %d late %d", n.r.ExpectedSeq(), n.r.LateStart())
		}
		n.feed(0, frame(60, 64))
		if n.r.LateStart() != 60 {
			t.Fatalf("StartNow late start %d after Resync, want 60", n.r.LateStart())
		}
		n.r.ResetAfterReplay(70)
		if n.r.LateStart() != 0 || n.r.ExpectedSeq() != 71 {
			t.Fatalf("after ResetAfterReplay: late %d expected %d", n.r.LateStart(), n.r.ExpectedSeq())
		}
	})
	t.Run("Start with StartNow is refused", func(t *testing.T) {
		c := now()
		c.Start = 3
		if _, err := NewReceiver(c); !errors.Is(err, ErrConfig) {
			t.Fatalf("err %v", err)
		}
	})
}

// TestReceiverStartUnderLoss: on the virtual clock, 30 % of what
// reaches the receiver is lost, the first datagrams included; every run
// delivers from seq 1, not wherever its first surviving datagram landed.
func TestReceiverStartUnderLoss(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		o := defaultOpt()
		h := newHarness(t, o)
		h.impairData(mem.Impairment{Seed: seed, DropProb: 0.3})
		for i := 0; i < 40; i++ {
			h.send(50)
			h.run(5*ms, ms) // 2000 records over 200 ms: 10 000 records/s
		}
		h.impairData(mem.Impairment{})
		h.run(2000*ms, ms)
		h.expectDelivered(1, 2000)
	}
}
