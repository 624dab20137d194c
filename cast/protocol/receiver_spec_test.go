package protocol

import (
	"math"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// recvDirect drives a Receiver with hand-made datagrams.
type recvDirect struct {
	t        *testing.T
	r        *Receiver
	out      *batch.Vec
	seqs     []uint64
	statuses []wire.Status
}

func newRecvDirect(t *testing.T, cfg ReceiverConfig) *recvDirect {
	r, err := NewReceiver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &recvDirect{t: t, r: r, out: batch.New(128, 2048)}
}

func (d *recvDirect) feed(now int64, b []byte) {
	d.r.Handle(b, now, d.out, func(_ wire.Header, p []byte) { d.seqs = append(d.seqs, wire.Seq(p)) })
}

// naks returns the NAKs the receiver emitted since the last call (its
// Status frames go to d.statuses) and resets out.
func (d *recvDirect) naks() []wire.Nak {
	var ns []wire.Nak
	for i := 0; i < d.out.Len(); i++ {
		b, _ := d.out.Msg(i)
		h, p, _, err := wire.DecodeFrame(b)
		if err == nil && h.Type == wire.TypeStatus {
			st, err := wire.ParseStatus(p)
			if err != nil {
				d.t.Fatalf("bad Status % x", b)
			}
			d.statuses = append(d.statuses, st)
			continue
		}
		if err != nil || h.Type != wire.TypeNak {
			d.t.Fatalf("receiver emitted a non-NAK: % x", b)
		}
		n, _ := wire.ParseNak(p)
		ns = append(ns, n)
	}
	d.out.Reset()
	return ns
}

// TestReceiverSpecCases are the receiver cases of spec §9 that are
// clearer with hand-made datagrams.
func TestReceiverSpecCases(t *testing.T) {
	t.Run("slot collision case: one datagram is not fatal, an overrun reconnects and stays set", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		d.feed(0, frame(1, 64))
		d.feed(0, frame(2050, 64)) // 2050 − 2 = 2048 ≥ window: dropped, the window NAKed
		if o := d.r.Outcome(); o.Kind != Live {
			t.Fatalf("one datagram beyond the window: outcome %+v", o)
		}
		if n := d.naks(); len(n) != 1 || n[0] != (wire.Nak{From: 2, Count: 2048}) {
			t.Fatalf("NAKs %+v, want the window {2 2048}", n)
		}
		// A sender that keeps outrunning the window: 64 datagrams (2050
		// and 63 more) over at least 50 ms.
		for i := 0; i < 63; i++ {
			d.feed(int64(i)*int64(ms), frame(4098+uint64(i), 64))
		}
		want := Outcome{Kind: Reconnect, LastDelivered: 1, Seq: 4098 + 62}
		if o := d.r.Outcome(); o != want {
			t.Fatalf("outcome %+v, want %+v", o, want)
		}
		d.feed(int64(64*ms), frame(2, 64)) // valid in-order record: still Reconnect
		if o := d.r.Outcome(); o != want || len(d.seqs) != 1 {
			t.Fatalf("outcome %+v delivered %v after in-order record", o, d.seqs)
		}
		d.r.ResetAfterReplay(4097)
		d.feed(int64(65*ms), frame(4098, 64))
		if len(d.seqs) != 2 || d.seqs[1] != 4098 || d.r.Outcome().Kind != Live {
			t.Fatalf("after reset: delivered %v outcome %+v", d.seqs, d.r.Outcome())
		}
	})
	t.Run("one coalesced datagram beyond the window counts once", func(t *testing.T) {
		cfg := DefaultReceiverConfig()
		cfg.NakDebounce = 0
		cfg.ReorderSlots = 16
		d := newRecvDirect(t, cfg)
		d.feed(0, frame(1, 64))
		var big []byte
		for s := uint64(100); s < 200; s++ {
			big = append(big, frame(s, 8)...)
		}
		d.feed(0, big)
		if o := d.r.Outcome(); o.Kind != Live || d.r.Stats().OutOfWindow != 100 {
			t.Fatalf("outcome %+v stats %+v", o, d.r.Stats())
		}
	})
	t.Run("heartbeat announcing 5 after seq 1 NAKs the sender", func(t *testing.T) {
		cfg := DefaultReceiverConfig()
		cfg.Sender = mem.AddrA
		d := newRecvDirect(t, cfg)
		d.feed(0, frame(1, 64))
		d.out.Reset() // the first Status
		d.feed(0, hbFrame(5))
		for i := 0; i < d.out.Len(); i++ {
			if _, to := d.out.Msg(i); to != mem.AddrA {
				t.Fatalf("datagram to %v, want %v", to, mem.AddrA)
			}
		}
		if n := d.naks(); len(n) != 1 || n[0] != (wire.Nak{From: 2, Count: 4}) {
			t.Fatalf("NAKs %+v, want one {2 4}", n)
		}
	})
	t.Run("forged heartbeat with a huge seq", func(t *testing.T) {
		for _, hi := range []uint64{math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 2 + 2048} {
			d := newRecvDirect(t, DefaultReceiverConfig())
			d.feed(0, frame(1, 64))
			d.feed(0, hbFrame(hi)) // the reference's rule: NAK what the window holds
			if n := d.naks(); len(n) != 1 || n[0] != (wire.Nak{From: 2, Count: 2048}) {
				t.Fatalf("highest %d: NAKs %+v, want the window", hi, n)
			}
			if o := d.r.Outcome(); o.Kind != Live {
				t.Fatalf("highest %d: outcome %+v", hi, o)
			}
			// The sender's own heartbeat says what exists: the phantom
			// gap is forgotten, nothing is re-NAKed, nothing faults.
			d.feed(int64(ms), hbFrame(1))
			if d.r.HighestSeen() != 1 || d.r.Stats().Lowered != 1 {
				t.Fatalf("highest %d: highest_seen %d after the true heartbeat", hi, d.r.HighestSeen())
			}
			for now := int64(ms); now < int64(3*time.Second); now += int64(10 * ms) {
				d.r.Tick(now, d.out)
			}
			if n := d.naks(); len(n) != 0 || d.r.Outcome().Kind != Live {
				t.Fatalf("highest %d: phantom gap: NAKs %+v, %+v", hi, n, d.r.Outcome())
			}
			d.feed(int64(3*time.Second), frame(2, 64))
			if len(d.seqs) != 2 {
				t.Fatalf("delivered %v", d.seqs)
			}
		}
		// Just inside the window: one NAK, count bounded by the window.
		d := newRecvDirect(t, DefaultReceiverConfig())
		d.feed(0, frame(1, 64))
		d.feed(0, hbFrame(1+2048))
		if n := d.naks(); len(n) != 1 || n[0] != (wire.Nak{From: 2, Count: 2048}) {
			t.Fatalf("NAKs %+v", n)
		}
	})
	t.Run("late duplicate far behind is dropped without rewind", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		for s := uint64(1); s <= 300; s++ {
			d.feed(0, frame(s, 64))
		}
		d.feed(0, frame(5, 64))
		d.feed(0, frame(150, 64))
		if d.r.ExpectedSeq() != 301 || d.r.Stats().Duplicates != 2 {
			t.Fatalf("expected %d dups %d", d.r.ExpectedSeq(), d.r.Stats().Duplicates)
		}
		d.feed(0, frame(301, 64))
		if len(d.seqs) != 301 || d.seqs[300] != 301 {
			t.Fatalf("delivered %d", len(d.seqs))
		}
	})
	t.Run("sender restart is detected by heartbeat", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		for s := uint64(1); s <= 10; s++ {
			d.feed(0, frame(s, 64))
		}
		d.feed(0, hbFrame(10)) // equal: fine
		if d.r.Outcome().Kind != Live {
			t.Fatalf("outcome %+v", d.r.Outcome())
		}
		d.feed(0, hbFrame(3)) // one datagram: suspicious, not fatal
		if d.r.Outcome().Kind != Live || d.r.Stats().RestartSuspects != 1 {
			t.Fatalf("one heartbeat below: outcome %+v", d.r.Outcome())
		}
		d.feed(0, hbFrame(10)) // refuted by the sender's next heartbeat
		d.feed(int64(ms), hbFrame(3))
		if d.r.Outcome().Kind != Live || d.r.Stats().RestartSuspects != 2 {
			t.Fatalf("refuted suspicion still counted: outcome %+v", d.r.Outcome())
		}
		d.feed(int64(2*ms), hbFrame(3)) // the second within the silence time
		want := Outcome{Kind: SenderRestarted, LastDelivered: 10, Highest: 3}
		if o := d.r.Outcome(); o != want {
			t.Fatalf("outcome %+v, want %+v", o, want)
		}
		d.feed(0, frame(1, 64))
		if len(d.seqs) != 10 {
			t.Fatal("delivered while SenderRestarted")
		}
		d.r.Resync()
		d.feed(0, frame(1, 64))
		if len(d.seqs) != 11 || d.seqs[10] != 1 {
			t.Fatalf("after resync delivered %v", d.seqs[10:])
		}
	})
	t.Run("persistent gap, retries 2, zero debounce, driven by heartbeats, then replay", func(t *testing.T) {
		cfg := DefaultReceiverConfig()
		cfg.MaxNakRetries = 2
		cfg.NakDebounce = -1 // every pump
		d := newRecvDirect(t, cfg)
		d.feed(0, frame(1, 64))
		for i := 1; d.r.Outcome().Kind == Live && i < 10; i++ {
			d.feed(int64(i)*int64(ms), hbFrame(3))
		}
		want := Outcome{Kind: Faulted, Cause: RetryBudget, LastDelivered: 1, GapStart: 2, GapEnd: 3}
		if o := d.r.Outcome(); o != want {
			t.Fatalf("outcome %+v, want %+v", o, want)
		}
		if n := len(d.naks()); n != 3 {
			t.Fatalf("%d NAKs, want 3", n)
		}
		// TCP replay supplied 2 and 3: tip 3.
		d.r.ResetAfterReplay(3)
		d.feed(int64(time.Second), frame(4, 64))
		if len(d.seqs) != 2 || d.seqs[1] != 4 {
			t.Fatalf("delivered %v", d.seqs)
		}
	})
	t.Run("runs split by a late arrival keep their budget", func(t *testing.T) {
		cfg := DefaultReceiverConfig()
		d := newRecvDirect(t, cfg)
		d.feed(0, frame(1, 64))
		d.feed(0, frame(10, 64)) // NAK {2, 8}
		d.feed(int64(ms), frame(5, 64))
		d.feed(int64(ms), frame(12, 64)) // NAK {11, 1}: a new run, at once
		if n := d.naks(); len(n) != 2 || n[0] != (wire.Nak{From: 2, Count: 8}) || n[1] != (wire.Nak{From: 11, Count: 1}) {
			t.Fatalf("NAKs %+v", n)
		}
		d.r.Tick(int64(50*ms), d.out) // {2,3} and {6,4} are due, {11} is not
		if n := d.naks(); len(n) != 2 || n[0] != (wire.Nak{From: 2, Count: 3}) || n[1] != (wire.Nak{From: 6, Count: 4}) {
			t.Fatalf("NAKs at 50 ms %+v", n)
		}
		d.r.Tick(int64(51*ms), d.out)
		if n := d.naks(); len(n) != 1 || n[0] != (wire.Nak{From: 11, Count: 1}) {
			t.Fatalf("NAKs at 51 ms %+v", n)
		}
	})
	t.Run("at most MaxNakRunsPerPump NAKs per pump", func(t *testing.T) {
		cfg := DefaultReceiverConfig()
		cfg.MaxNakRunsPerPump = 4
		d := newRecvDirect(t, cfg)
		d.feed(0, frame(1, 64))
		for s := uint64(3); s <= 21; s += 2 { // 10 single-seq gaps, each NAKed on arrival
			d.feed(0, frame(s, 64))
		}
		if n := len(d.naks()); n != 10 {
			t.Fatalf("first NAKs %d, want 10", n)
		}
		d.r.Tick(int64(50*ms), d.out)
		if n := len(d.naks()); n != 4 {
			t.Fatalf("re-NAKs in one pump = %d, want 4", n)
		}
		d.r.Tick(int64(50*ms)+1, d.out)
		if n := len(d.naks()); n != 4 {
			t.Fatalf("re-NAKs in the next pump = %d, want 4", n)
		}
	})
}

// TestBadDatagrams checks that every kind of bad datagram is counted by
// reason and never delivered.
func TestBadDatagrams(t *testing.T) {
	good := frame(1, 64)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		get  func(BadCounts) uint64
	}{
		{"short", good[:15], func(c BadCounts) uint64 { return c.Short }},
		{"version 0", mut(func(b []byte) []byte { b[0] = 0; return b }), func(c BadCounts) uint64 { return c.Version }},
		{"version 0xff", mut(func(b []byte) []byte { b[0] = 0xff; return b }), func(c BadCounts) uint64 { return c.Version }},
		{"len beyond datagram", good[:40], func(c BadCounts) uint64 { return c.Len }},
		{"CRC", mut(func(b []byte) []byte { b[30] ^= 1; return b }), func(c BadCounts) uint64 { return c.CRC }},
		{"seq 0", frame(0, 64), func(c BadCounts) uint64 { return c.SeqZero }},
		{"payload shorter than a seq", frame(0, 4), func(c BadCounts) uint64 { return c.ShortPayload }},
		{"short heartbeat", func() []byte { f := make([]byte, 16+8); _ = wire.Seal(f, wire.TypeHeartbeat); return f }(),
			func(c BadCounts) uint64 { return c.ShortPayload }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newRecvDirect(t, DefaultReceiverConfig())
			d.feed(0, tc.b)
			st := d.r.Stats()
			if tc.get(st.Bad) != 1 || st.Bad.Total() != 1 || len(d.seqs) != 0 {
				t.Fatalf("bad counts %+v, delivered %v", st.Bad, d.seqs)
			}
		})
	}
	t.Run("bytes beyond 16+len are ignored", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		d.feed(0, append(append([]byte(nil), good...), 1, 2, 3))
		if len(d.seqs) != 1 || d.r.Stats().Bad.Total() != 0 {
			t.Fatalf("delivered %v bad %+v", d.seqs, d.r.Stats().Bad)
		}
	})
}

// A heartbeat queued before a catch-up (highest below the replay tip) is
// stale, not a restart: records served by replay are durable and a sender
// with a WAL cannot have lost them. Below what the Receiver delivered
// itself, it is a restart.
func TestStaleHeartbeatAfterReplay(t *testing.T) {
	d := newRecvDirect(t, DefaultReceiverConfig())
	for s := uint64(1); s <= 100; s++ {
		d.feed(0, frame(s, 64))
	}
	d.r.ResetAfterReplay(500) // caught up to 500 over TCP
	d.feed(0, hbFrame(300))   // queued before the catch-up
	if o := d.r.Outcome(); o.Kind != Live || d.r.Stats().StaleHeartbeats != 1 {
		t.Fatalf("outcome %+v stats %+v", o, d.r.Stats())
	}
	d.feed(0, hbFrame(99)) // below what this Receiver delivered: restart (said twice)
	d.feed(0, hbFrame(99))
	want := Outcome{Kind: SenderRestarted, LastDelivered: 500, Highest: 99}
	if o := d.r.Outcome(); o != want {
		t.Fatalf("outcome %+v, want %+v", o, want)
	}
	d.r.ResetAfterReplay(500)
	for s := uint64(501); s <= 510; s++ {
		d.feed(0, frame(s, 64))
	}
	d.feed(0, hbFrame(505))
	d.feed(0, hbFrame(505))
	if o := d.r.Outcome(); o.Kind != SenderRestarted || o.LastDelivered != 510 {
		t.Fatalf("outcome %+v", o)
	}
}
