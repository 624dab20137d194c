package protocol

import (
	"errors"
	"slices"
	"testing"

	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

func skipFrame(seq, from uint64, reason uint32) []byte {
	f := make([]byte, wire.SkipFrameSize)
	wire.PutSkipFrame(f, wire.Skip{Seq: seq, From: from, Reason: reason})
	return f
}

// TestReceiverSkip: a Skip marker at seq S standing for From…S. The seqs
// a receiver delivered in that range are reported, what it buffered there
// is dropped, the hole is never NAKed, the marker is delivered in its
// place and delivery continues after it.
func TestReceiverSkip(t *testing.T) {
	feedRange := func(d *recvDirect, from, to uint64) {
		for s := from; s <= to; s++ {
			d.feed(0, frame(s, 64))
		}
	}
	t.Run("delivered into the hole: lost seqs reported", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		feedRange(d, 1, 10) // 6..10 were sent before they were durable
		d.feed(0, frame(12, 64))
		d.feed(0, skipFrame(101, 6, wire.SkipRestart))
		d.feed(0, frame(102, 64))
		if want := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 101, 102}; !slices.Equal(d.seqs, want) {
			t.Fatalf("delivered %v, want %v", d.seqs, want)
		}
		n := d.r.LastSkip()
		if n.Skip != (wire.Skip{Seq: 101, From: 6, Reason: wire.SkipRestart}) || n.LostFrom != 6 || n.LostTo != 10 {
			t.Fatalf("notice %+v", n)
		}
		st := d.r.Stats()
		if st.Skips != 1 || st.SkipLost != 5 || st.SkipDiscarded != 1 || d.r.Outcome().Kind != Live {
			t.Fatalf("stats %+v outcome %v", st, d.r.Outcome())
		}
		for _, nk := range d.naks() {
			if nk.From <= 100 && nk.From+nk.Count > 12 {
				t.Fatalf("NAKed the hole: %+v", nk)
			}
		}
		d.feed(0, skipFrame(101, 6, wire.SkipRestart)) // a repeat is a duplicate
		if len(d.seqs) != 12 || d.r.Stats().Skips != 1 {
			t.Fatalf("repeated marker: %v", d.seqs)
		}
	})
	t.Run("nothing of the hole delivered", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		feedRange(d, 1, 5)
		d.feed(0, skipFrame(70001, 6, wire.SkipRestart)) // far beyond the reorder window: a hole is not a distance
		d.feed(0, frame(70002, 64))
		if want := []uint64{1, 2, 3, 4, 5, 70001, 70002}; !slices.Equal(d.seqs, want) {
			t.Fatalf("delivered %v, want %v", d.seqs, want)
		}
		if n := d.r.LastSkip(); n.LostFrom != 0 || n.LostTo != 0 {
			t.Fatalf("notice %+v", n)
		}
	})
	t.Run("records before the hole missing: pending until repaired", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		feedRange(d, 1, 2)
		d.feed(0, frame(4, 64))
		d.naks()
		d.feed(0, skipFrame(101, 6, wire.SkipRestart))
		d.feed(0, frame(102, 64))
		d.feed(0, frame(50, 64)) // a late record from before the crash, inside the hole
		naks := d.naks()
		var asked []uint64
		for _, nk := range naks {
			for s := nk.From; s < nk.From+nk.Count; s++ {
				asked = append(asked, s)
			}
		}
		if !slices.Equal(asked, []uint64{5}) {
			t.Fatalf("NAKed %v, want only 5 (3 was NAKed before, the hole never)", asked)
		}
		if want := []uint64{1, 2}; !slices.Equal(d.seqs, want) {
			t.Fatalf("delivered %v", d.seqs)
		}
		d.feed(0, frame(3, 64))
		d.feed(0, frame(5, 64))
		if want := []uint64{1, 2, 3, 4, 5, 101, 102}; !slices.Equal(d.seqs, want) {
			t.Fatalf("delivered %v, want %v", d.seqs, want)
		}
		if n := d.r.LastSkip(); n.Skip.Seq != 101 || n.LostFrom != 0 {
			t.Fatalf("notice %+v", n)
		}
		if st := d.r.Stats(); st.SkipDiscarded != 1 || st.Skips != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("records before the hole missing and the marker beyond the window", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		feedRange(d, 1, 2)
		d.feed(0, skipFrame(70001, 6, wire.SkipRestart))
		if o := d.r.Outcome(); o.Kind != Reconnect || o.Seq != 70001 || o.LastDelivered != 2 {
			t.Fatalf("outcome %+v", o)
		}
	})
	t.Run("a receiver that starts at a marker", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		d.feed(0, skipFrame(7, 1, wire.SkipRestart))
		d.feed(0, frame(8, 64))
		if want := []uint64{7, 8}; !slices.Equal(d.seqs, want) {
			t.Fatalf("delivered %v", d.seqs)
		}
	})
	t.Run("a bad marker is counted, not applied", func(t *testing.T) {
		d := newRecvDirect(t, DefaultReceiverConfig())
		feedRange(d, 1, 3)
		d.feed(0, skipFrame(10, 11, wire.SkipRestart)) // From above its own seq
		if len(d.seqs) != 3 || d.r.Stats().Bad.ShortPayload != 1 || d.r.Stats().Skips != 0 {
			t.Fatalf("delivered %v stats %+v", d.seqs, d.r.Stats())
		}
	})
}

// skipLog is a fakeLog that continued past seqs a crash left unused: its
// first record is a Skip marker, and it can say it is failing.
type skipLog struct {
	*fakeLog
	marker []byte
	err    error
}

func (l *skipLog) Skipped() []byte { return l.marker }
func (l *skipLog) Err() error      { return l.err }

func newSkipLog(from, seq uint64) *skipLog {
	l := &skipLog{fakeLog: newFakeLog(seq)}
	var p [wire.SkipPayloadSize]byte
	wire.Skip{Seq: seq, From: from, Reason: wire.SkipRestart}.Put(p[:])
	f, _ := l.Append(wire.TypeSkip, p[:])
	l.marker = append([]byte(nil), f...)
	return l
}

// TestSenderSendsTheSkipFirst: a Sender over a log that wrote a Skip
// marker sends it before its first record (Send before any Tick: the
// unpaced producer), answers NAKs for the skipped seqs with it, and
// refuses protocol record types as data.
func TestSenderSendsTheSkipFirst(t *testing.T) {
	l := newSkipLog(51, 1000)
	s, out := newTestSender(t, senderCfg(), l)
	if s.NextSeq() != 1001 {
		t.Fatalf("NextSeq %d", s.NextSeq())
	}
	if _, err := s.Send(100, make([]byte, 64), 0, out); err != nil {
		t.Fatal(err)
	}
	if got := retransmitted(t, out); !slices.Equal(got, []uint64{1000, 1001}) {
		t.Fatalf("first datagrams carry %v, want the marker 1000 then 1001", got)
	}
	s.Tick(1, out)
	if out.Len() != 0 {
		t.Fatal("the marker was sent twice")
	}
	sendN(t, s, out, 5)
	s.Handle(nakFrame(40, 20), mem.AddrB, 2, out) // 40..50 exist, 51..59 are skipped
	got := retransmitted(t, out)
	if slices.Contains(got, 51) || !slices.Contains(got, 1000) || slices.Contains(got, 1001) {
		t.Fatalf("NAK over the hole answered with %v", got)
	}
	if _, err := s.Send(wire.TypeSkip, make([]byte, 64), 3, out); !errors.Is(err, ErrControlType) {
		t.Fatalf("Send(TypeSkip): %v", err)
	}
	if st := s.Stats(); st.SkipsSent != 1 || st.RetxHot != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Tick first: the marker goes out on the first Tick.
	s2, out2 := newTestSender(t, senderCfg(), newSkipLog(1, 7))
	s2.Tick(0, out2)
	if got := retransmitted(t, out2); !slices.Equal(got, []uint64{7}) {
		t.Fatalf("first Tick sent %v", got)
	}
}

// TestHeartbeatsWithheldWhileTheLogFails: a Sender whose log reports an
// error (a full disk) sends no heartbeats, so receivers see silence, not
// a healthy idle stream; they resume when the log recovers.
func TestHeartbeatsWithheldWhileTheLogFails(t *testing.T) {
	l := &skipLog{fakeLog: newFakeLog(1)}
	cfg := senderCfg()
	s, out := newTestSender(t, cfg, l)
	sendN(t, s, out, 3)
	l.err = errors.New("wal: flush failed: no space left on device")
	hb := int64(cfg.HeartbeatInterval)
	for now := int64(0); now < 20*hb; now += hb / 4 {
		s.Tick(now, out)
	}
	if out.Len() != 0 || s.Stats().HeartbeatsWithheld == 0 {
		t.Fatalf("%d datagrams while the log fails, stats %+v", out.Len(), s.Stats())
	}
	if e, ok := s.NextEvent(); !ok || e.Kind != LogError {
		t.Fatalf("event %+v (%v) while the log fails, want LogError", e, ok)
	}
	l.err = nil
	s.Tick(21*hb, out)
	s.Tick(22*hb, out)
	if out.Len() == 0 {
		t.Fatal("no heartbeat after the log recovered")
	}
}
