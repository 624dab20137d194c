package protocol

import (
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// preLog is an allocation-free Log for the allocation tests.
type preLog struct {
	next uint64
	buf  []byte
}

func (l *preLog) Append(typ uint16, payload []byte) ([]byte, error) {
	f := l.buf[:wire.HeaderSize+len(payload)]
	copy(f[wire.HeaderSize:], payload)
	le.PutUint64(f[wire.HeaderSize:], l.next)
	l.next++
	return f, wire.Seal(f, typ)
}

func (l *preLog) NextSeq() uint64 { return l.next }

func TestZeroAllocs(t *testing.T) {
	payload := make([]byte, 128)
	out := batch.New(64, 2048)
	out2 := batch.New(64, 2048)
	var sink uint64
	deliver := func(h wire.Header, p []byte) { sink += uint64(h.Len) }

	check := func(name string, f func()) {
		t.Helper()
		f() // warm up
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, n)
		}
	}

	for _, withLog := range []bool{false, true} {
		var log Log
		if withLog {
			log = &preLog{next: 1, buf: make([]byte, 4096)}
		}
		s, err := NewSender(senderCfg(), log)
		if err != nil {
			t.Fatal(err)
		}
		name := "Sender.Send"
		if withLog {
			name += " with WAL"
		}
		check(name, func() {
			out.Reset()
			_, _ = s.Send(100, payload, 0, out)
		})
		nak := nakFrame(s.NextSeq()-10, 4)
		now := int64(0)
		check("NAK service from the hot ring", func() {
			out.Reset()
			now += int64(ms)
			s.Handle(nak, mem.AddrB, now, out)
			if out.Len() != 4 {
				t.Fatalf("%d retransmits", out.Len())
			}
		})
		check("Sender.Tick heartbeat", func() {
			out.Reset()
			now += int64(DefaultHeartbeatInterval)
			s.Tick(now, out)
			if out.Len() != 1 {
				t.Fatal("no heartbeat")
			}
		})
	}

	r, err := NewReceiver(DefaultReceiverConfig())
	if err != nil {
		t.Fatal(err)
	}
	frames := make([][]byte, 4096)
	for i := range frames {
		frames[i] = frame(uint64(i+1), 128)
	}
	i := 0
	check("Receiver.Handle in order", func() {
		out.Reset()
		r.Handle(frames[i], 0, out, deliver)
		i++
	})
	// Out of order: deliver seq k+1 and k+2 after k+3 (one NAK, then the drain).
	check("Receiver.Handle out of order", func() {
		out.Reset()
		r.Handle(frames[i+2], 0, out, deliver)
		r.Handle(frames[i+1], 0, out, deliver)
		r.Handle(frames[i], 0, out, deliver)
		i += 3
	})
	if r.ExpectedSeq() != uint64(i+1) {
		t.Fatalf("expected %d after %d records", r.ExpectedSeq(), i)
	}
	hb := hbFrame(uint64(i))
	check("Receiver.Handle heartbeat", func() {
		out.Reset()
		r.Handle(hb, 0, out, deliver)
	})
	check("Receiver.Tick", func() {
		out.Reset()
		r.Tick(0, out)
	})
	bad := append([]byte(nil), frames[0]...)
	bad[20] ^= 1
	check("Receiver.Handle bad CRC", func() { r.Handle(bad, 0, out, deliver) })

	// Flow control: a negotiated pair.
	s, err := NewSender(senderCfg(), &preLog{next: 1, buf: make([]byte, 4096)})
	if err != nil {
		t.Fatal(err)
	}
	rcfg := DefaultReceiverConfig()
	r, err = NewReceiver(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1)
	var seqFrame [4096]byte
	step := func() {
		// sender → receiver, receiver → sender, one record each way.
		now += int64(ms) // every call is a Status interval later
		out.Reset()
		if _, err := s.Send(100, payload, now, out); err != nil {
			t.Fatal(err)
		}
		s.Tick(now, out)
		for k := 0; k < out.Len(); k++ {
			m, _ := out.Msg(k)
			copy(seqFrame[:], m)
			r.Handle(seqFrame[:len(m)], now, out2, deliver)
		}
		for k := 0; k < out2.Len(); k++ {
			m, _ := out2.Msg(k)
			s.Handle(m, mem.AddrB, now, out)
		}
		out2.Reset()
		r.SetConsumerRoom(1000, now, out2)
		_ = r.Deadline() + s.Deadline()
	}
	for k := 0; k < 10; k++ {
		step()
	}
	if _, limited := s.Limit(); !limited || !r.SpeaksProbes() {
		t.Fatalf("pair did not negotiate: %+v %+v", s.Stats(), r.Stats())
	}
	check("negotiated Send, probe, Status, SetConsumerRoom", step)
}
