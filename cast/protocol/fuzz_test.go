package protocol

import (
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// FuzzReceiverHandle feeds arbitrary datagrams (a sequence split on a
// length prefix) to a Receiver: it must never panic, deliver seqs only in
// order and never emit anything but NAKs within the window.
func FuzzReceiverHandle(f *testing.F) {
	f.Add(frame(1, 64), frame(3, 64), hbFrame(5))
	f.Add(hbFrame(1<<63), frame(1, 8), nakFrame(1, 1))
	f.Add(append(frame(1, 64), frame(2, 64)...), []byte{1, 0}, frame(0, 64))
	f.Add(frame(1, 64), skipFrame(40, 2, wire.SkipRestart), frame(41, 64))
	f.Add(frame(1, 64), skipFrame(40, 5, wire.SkipRestart), frame(3, 64))
	f.Add(frame(1, 64), probeFrame(wire.Probe{Highest: 1 << 40, TS: 5, SenderID: 9, SRTT: 1 << 31}), frame(5000, 64))
	f.Add(frame(7, 64), statusFrame(wire.Status{ReceiverID: 3, Window: 9}), probeFrame(wire.Probe{Highest: 3, TS: 1, SenderID: 2}))
	cfg := DefaultReceiverConfig()
	cfg.ReorderSlots = 64
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		r, err := NewReceiver(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out := batch.New(256, 2048)
		var last uint64
		deliver := func(h wire.Header, p []byte) {
			seq := wire.Seq(p)
			// In order; a Skip marker may jump (the seqs it stands for
			// have no record).
			if last != 0 && seq != last+1 && !(h.Type == wire.TypeSkip && seq > last) {
				t.Fatalf("delivered %d after %d", seq, last)
			}
			last = seq
		}
		for i, d := range [][]byte{a, b, c, a, c, b} {
			r.Handle(d, int64(i)*int64(ms), out, deliver)
			r.Tick(int64(i)*int64(60*ms), out)
		}
		for i := 0; i < out.Len(); i++ {
			m, _ := out.Msg(i)
			h, p, _, err := wire.DecodeFrame(m)
			if err == nil && h.Type == wire.TypeStatus {
				if st, err := wire.ParseStatus(p); err != nil || st.Window > uint32(cfg.ReorderSlots) {
					t.Fatalf("Status %+v (%v)", st, err)
				}
				continue
			}
			if err != nil || h.Type != wire.TypeNak {
				t.Fatalf("emitted % x", m)
			}
			n, _ := wire.ParseNak(p)
			if n.Count == 0 || n.Count > uint64(cfg.ReorderSlots) {
				t.Fatalf("NAK %+v", n)
			}
		}
	})
}

// FuzzSenderHandle feeds arbitrary datagrams to a Sender holding 100
// records: it must never panic and never send more than the ring holds.
func FuzzSenderHandle(f *testing.F) {
	f.Add(nakFrame(1, 5))
	f.Add(nakFrame(0, 1<<63))
	f.Add(append(nakFrame(90, 20), nakFrame(1, 1)...))
	f.Add([]byte{1, 0, 0x11, 0, 64, 0})
	f.Add(statusFrame(wire.Status{Delivered: 50, Highest: 99, ReceiverID: 1, Window: 10, Serial: 1, Flags: wire.StatusSynced}))
	f.Add(append(statusFrame(wire.Status{Delivered: 1 << 63, ReceiverID: 2, Window: 1 << 31, EchoTS: 1 << 62, Serial: 5, Flags: 3}), nakFrame(1, 200)...))
	cfg := senderCfg()
	cfg.RingSlots = 64
	// One batch for every input: a worker runs its inputs one at a time, and
	// allocating 1 MiB per input made this target ~20× slower.
	out := batch.New(512, 2048)
	p := make([]byte, 64)
	f.Fuzz(func(t *testing.T, d []byte) {
		s, err := NewSender(cfg, newFakeLog(1))
		if err != nil {
			t.Fatal(err)
		}
		out.Reset()
		for i := 0; i < 100; i++ {
			if _, err := s.Send(100, p, 0, out); err != nil {
				t.Fatal(err)
			}
		}
		out.Reset()
		s.Handle(d, mem.AddrB, 0, out)
		if out.Len() > cfg.RingSlots*(len(d)/wire.ControlFrameSize+1) {
			t.Fatalf("%d retransmits for a %d-byte datagram", out.Len(), len(d))
		}
		checkColdWaiting(t, &s.retx.cold)
		var reqs [16]ColdRequest
		if n := s.ColdRequests(reqs[:]); n > cfg.MaxColdInFlight {
			t.Fatalf("%d cold requests", n)
		}
		checkColdWaiting(t, &s.retx.cold)
		if s.ColdPending() {
			t.Fatal("cold requests pending after ColdRequests took all it may")
		}
	})
}

// checkColdWaiting checks the cold queue's count of queued requests not
// yet taken (what ColdPending reads) against its slots.
func checkColdWaiting(t *testing.T, q *coldQueue) {
	t.Helper()
	n := 0
	for _, c := range q.slots {
		if c.used && !c.taken {
			n++
		}
	}
	if n != q.waiting {
		t.Fatalf("cold queue: %d slots waiting, count says %d", n, q.waiting)
	}
}

func statusFrame(st wire.Status) []byte {
	f := make([]byte, wire.ControlFrameSize)
	wire.PutStatusFrame(f, st)
	return f
}

func probeFrame(p wire.Probe) []byte {
	f := make([]byte, wire.ControlFrameSize)
	wire.PutProbeFrame(f, p)
	return f
}
