package protocol

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// TestInitialWindow: before any Status a fresh sender sends at most
// InitialWindow records for InitialWait; a walcast receiver's first Status
// lifts it at once, and a reference receiver's NAK of the window's last
// record (announced by a heartbeat in its place) within a few round trips.
func TestInitialWindow(t *testing.T) {
	for _, ref := range []bool{true, false} {
		t.Run(modeName(ref), func(t *testing.T) {
			o := defaultOpt()
			o.r.NoStatus = ref
			o.s.InitialWindow = 100
			o.s.InitialWait = DefaultHeartbeatInterval // (default 1 s) within the 300 ms below
			h := newHarness(t, o)
			h.impairData(mem.Impairment{Latency: 200 * us})
			h.impairNaks(mem.Impairment{Latency: 200 * us})
			start := h.now()
			sent := 0
			var heldAt int64
			for h.now()-start < int64(300*ms) && sent < 300 {
				for sent < 300 {
					if h.sOut.Full() {
						h.flushSender()
					}
					if _, err := h.s.Send(100, h.payload, h.now(), h.sOut); err != nil {
						if err != ErrBackpressure {
							t.Fatal(err)
						}
						if heldAt == 0 {
							heldAt = h.now() - start
						}
						break
					}
					sent++
					if sent == 101 {
						t.Logf("record 101 went out after %v", time.Duration(h.now()-start))
						if ref && h.now()-start > int64(10*ms) {
							t.Fatalf("record 101 only after %v: the probe's NAK should release the window", time.Duration(h.now()-start))
						}
						if !ref && h.now()-start > int64(2*ms) {
							t.Fatalf("record 101 only after %v: the first Status should lift the window", time.Duration(h.now()-start))
						}
					}
				}
				h.flushSender()
				h.step()
				h.p.Clock.Advance(100 * us)
			}
			if heldAt != 0 && sent < 101 {
				t.Fatal("never released")
			}
			h.run(time.Second, ms)
			h.expectDelivered(1, 300)
			if st := h.s.Stats(); st.InitialHeld == 0 {
				t.Fatalf("initial window never held: %+v", st)
			}
		})
	}
}

// TestFlowHostileStatus: Status frames from the wrong source, broken,
// reordered or flooding the table change nothing they should not.
func TestFlowHostileStatus(t *testing.T) {
	s, out := newTestSender(t, senderCfg(), newFakeLog(1))
	sendN(t, s, out, 10)
	st := wire.Status{Delivered: 5, Highest: 10, ReceiverID: 7, Window: 10, Serial: 2, Flags: wire.StatusSynced}
	frameOf := func(st wire.Status) []byte {
		b := make([]byte, wire.ControlFrameSize)
		wire.PutStatusFrame(b, st)
		return b
	}
	s.Handle(frameOf(st), rogue, 0, out) // wrong source
	if _, l := s.Limit(); l || s.Stats().BadSource != 1 {
		t.Fatalf("Status from a rogue source accepted: %+v", s.Stats())
	}
	bad := frameOf(st)
	bad[40] ^= 1 // CRC
	s.Handle(bad, mem.AddrB, 0, out)
	zero := st
	zero.ReceiverID = 0
	s.Handle(frameOf(zero), mem.AddrB, 0, out)
	if _, l := s.Limit(); l || s.Stats().Bad.CRC != 1 || s.Stats().BadStatus != 1 {
		t.Fatalf("broken Status accepted: %+v", s.Stats())
	}
	s.Handle(frameOf(st), mem.AddrB, 0, out)
	if e, l := s.Limit(); !l || e != 15 {
		t.Fatalf("limit %d %v, want 15", e, l)
	}
	old := st
	old.Serial, old.Window, old.Delivered = 1, 0, 0
	s.Handle(frameOf(old), mem.AddrB, 0, out) // reordered: older serial
	if e, _ := s.Limit(); e != 15 || s.Stats().StaleStatus != 1 {
		t.Fatalf("stale Status moved the limit to %d", e)
	}
	shrink := st
	shrink.Serial, shrink.Window = 3, 1 // a smaller edge never lowers it
	s.Handle(frameOf(shrink), mem.AddrB, 0, out)
	if e, _ := s.Limit(); e != 15 {
		t.Fatalf("edge lowered to %d", e)
	}
	// A flood of ids from the one allowed address replaces, never grows.
	for id := uint64(100); id < 200; id++ {
		f := st
		f.ReceiverID = id
		s.Handle(frameOf(f), mem.AddrB, 0, out)
	}
	if n := s.Receivers(make([]ReceiverInfo, 16)); n != 1 {
		t.Fatalf("%d receivers in the table", n)
	}
	// With any source accepted, the table is bounded.
	cfg := senderCfg()
	cfg.AcceptAnyNakSource = true
	cfg.MaxReceivers = 4
	s2, _ := newTestSender(t, cfg, newFakeLog(1))
	for i := 0; i < 10; i++ {
		f := st
		f.ReceiverID = uint64(i + 1)
		s2.Handle(frameOf(f), netipPort(i), 0, out)
	}
	// None of them echoed a probe: each newcomer evicts the least
	// recently heard (TestFlowForgedFloodNoLockout).
	if n := s2.Receivers(make([]ReceiverInfo, 16)); n != 4 || s2.Stats().ReceiversEvicted != 6 || s2.Stats().StatusRejected != 0 {
		t.Fatalf("%d receivers, %d evicted, %d rejected", n, s2.Stats().ReceiversEvicted, s2.Stats().StatusRejected)
	}
	// NoFlowControl: Status is ignored like any unknown type.
	cfg = senderCfg()
	cfg.NoFlowControl = true
	s3, _ := newTestSender(t, cfg, newFakeLog(1))
	s3.Handle(frameOf(st), mem.AddrB, 0, out)
	if _, l := s3.Limit(); l || s3.Stats().Ignored != 1 {
		t.Fatalf("NoFlowControl honoured a Status: %+v", s3.Stats())
	}
}

// TestBackpressureError: ErrBackpressure is a wal.ErrBackpressure for
// errors.Is, and a refused Send consumes no seq.
func TestBackpressureError(t *testing.T) {
	s, out := newTestSender(t, senderCfg(), newFakeLog(1))
	b := make([]byte, wire.ControlFrameSize)
	wire.PutStatusFrame(b, wire.Status{Delivered: 0, ReceiverID: 1, Window: 3, Serial: 1, Flags: wire.StatusSynced})
	s.Handle(b, mem.AddrB, 0, out)
	sendN(t, s, out, 3)
	if _, err := s.Send(100, make([]byte, 64), 0, out); err != ErrBackpressure || !isWalBackpressure(err) {
		t.Fatalf("err %v", err)
	}
	if s.NextSeq() != 4 || s.Stats().Backpressured != 1 {
		t.Fatalf("next %d stats %+v", s.NextSeq(), s.Stats())
	}
}

func isWalBackpressure(err error) bool { return errors.Is(err, wal.ErrBackpressure) }

func netipPort(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), uint16(5000+i))
}

// TestWALLessWindowWithinRing: a sender without a log repairs only from
// its hot ring, so whatever window the receiver grants (here 8× the
// ring), it never has more than RingSlots records past the receiver's
// delivered seq in flight, and a burst loss at the start of the stream
// is repaired (before the cap it ran 512 past the gap: ColdRejected, the
// receiver faulted). Both before the first Status (the initial window)
// and after it.
func TestWALLessWindowWithinRing(t *testing.T) {
	const ring, total = 64, 3000
	for _, tc := range []struct {
		name   string
		warmup bool // seq 1 delivered and its Status heard before the loss
	}{
		{"initial window", false},
		{"negotiated window", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOpt()
			o.noLog = true
			o.s.RingSlots = ring
			o.r.ReorderSlots = 8 * ring
			h := newHarness(t, o)
			sent := 0
			if tc.warmup {
				h.send(1)
				h.run(2*ms, 100*us)
				if edge, limited := h.s.Limit(); !limited || edge != 1+ring {
					t.Fatalf("limit %d %v after the first Status, want %d (delivered 1 + RingSlots)", edge, limited, 1+ring)
				}
				sent = 1
			}
			first := uint64(sent + 2)
			var burst []uint64
			for s := first; s < first+ring/2; s++ {
				burst = append(burst, s)
			}
			h.impairData(mem.Impairment{Script: dropSeqs(1, burst...)})
			maxAhead := uint64(0)
			for waited := 0; sent < total; {
				_, err := h.s.Send(100, h.payload, h.now(), h.sOut)
				switch {
				case errors.Is(err, ErrBatchFull):
					h.flushSender()
					continue
				case err == ErrBackpressure:
					if waited++; waited > 100_000 {
						t.Fatalf("held 10 s at %d sent, delivered %d, limit %s, send %+v, recv %+v",
							sent, h.delivered, fmtLimit(h.s), h.s.Stats(), h.r.Stats())
					}
					h.flushSender()
					h.step()
					h.p.Clock.Advance(100 * us)
					continue
				case err != nil:
					t.Fatal(err)
				}
				sent++
				h.checkWindow()
				if ahead := uint64(sent) - h.delivered; ahead > maxAhead {
					maxAhead = ahead
				}
			}
			h.flushSender()
			h.run(50*ms, 100*us)
			h.expectDelivered(1, total)
			if maxAhead > ring {
				t.Errorf("up to %d records past the receiver's delivered seq, want ≤ RingSlots %d", maxAhead, ring)
			}
			if st := h.s.Stats(); st.ColdRejected != 0 || st.RetxHot == 0 {
				t.Errorf("sender %+v: want the burst repaired from the hot ring", st)
			}
		})
	}
}

// TestWALLessSenderStatusCadence: a sender without a log runs at most
// RingSlots (default 4096) past the delivered seq of the last Status it
// heard, and a receiver with a wide window (ReorderSlots 1<<16, as the
// benchmarks use) must report often enough that this clamp does not hold
// the sender. Measured against its own window alone the receiver sent
// the urgent Status only after 16384 records, so the clamped sender
// waited for the 1 ms StatusInterval: at most ~4096 records per ms
// whatever the offered rate (cast bench cost: casting 4.0 M rec/s against
// 6.3 M without flow control). Offered 12.8 M rec/s over a 40 µs RTT:
// the sender is never held longer than a few steps, sends nearly all it
// is offered, and the receiver sends about one Status per 1024 records
// delivered, not more.
func TestWALLessSenderStatusCadence(t *testing.T) {
	const (
		dt     = 10 * us
		perDt  = 128 // records offered per dt
		run    = 20 * ms
		oneWay = 20 * time.Microsecond
	)
	o := defaultOpt()
	o.noLog = true
	o.r.ReorderSlots = 1 << 16
	h := newHarness(t, o)
	h.impairData(mem.Impairment{Latency: oneWay})
	h.impairNaks(mem.Impairment{Latency: oneWay})
	offered, sent := 0, 0
	var heldSince, maxHeld int64 = never, 0
	end := h.now() + int64(run)
	for h.now() < end {
		offered += perDt
		for i := 0; i < perDt; i++ {
			_, err := h.s.Send(100, h.payload, h.now(), h.sOut)
			if errors.Is(err, ErrBatchFull) {
				h.flushSender()
				_, err = h.s.Send(100, h.payload, h.now(), h.sOut)
			}
			if err == ErrBackpressure {
				if heldSince == never {
					heldSince = h.now()
				}
				break // the producer returns to the loop
			}
			if err != nil {
				t.Fatal(err)
			}
			sent++
			h.checkWindow()
			if heldSince != never {
				maxHeld = max(maxHeld, h.now()-heldSince)
				heldSince = never
			}
		}
		h.flushSender()
		h.step()
		h.p.Clock.Advance(dt)
	}
	// Past the initial window (the first round trip), a Status should
	// come every 1024 records, with 3072 left in the ring to cover the
	// 40 µs round trip (512 records at this rate).
	if maxHeld >= int64(200*us) {
		t.Errorf("sender held by flow control for up to %v (StatusInterval %v)", time.Duration(maxHeld), o.r.StatusInterval)
	}
	if sent < offered*9/10 {
		t.Errorf("sent %d of %d records offered in %v (%.1f M rec/s): the ring clamp held the sender", sent, offered, run, float64(sent)/run.Seconds()/1e6)
	}
	h.run(5*ms, dt)
	h.expectDelivered(1, uint64(sent))
	st := h.r.Stats()
	if limit := uint64(sent)/(statusSpan/4) + uint64(run/ms) + 10; st.StatusSent > limit {
		t.Errorf("receiver sent %d Status for %d records delivered, want ≤ %d", st.StatusSent, sent, limit)
	}
	t.Logf("sent %d of %d offered, held at most %v, %d Status, sender %+v", sent, offered, time.Duration(maxHeld), st.StatusSent, h.s.Stats())
}
