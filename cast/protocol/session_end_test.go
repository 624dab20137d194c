package protocol

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

func TestSenderEnd(t *testing.T) {
	sc := DefaultSenderConfig()
	sc.Dest = netip.MustParseAddrPort("10.0.0.2:2000")
	s, err := NewSender(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(64, 2048)
	pay := make([]byte, 64)
	for range 3 {
		if _, err := s.Send(100, pay, 1, out); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	// Not negotiated: the stream stops, the wire stays the reference's.
	if s.End(2, out) || out.Len() != 0 {
		t.Fatal("marker sent before any receiver negotiated")
	}
	if _, err := s.Send(100, pay, 3, out); !errors.Is(err, ErrEnded) {
		t.Fatalf("Send after End: %v", err)
	}
	hb := int64(sc.HeartbeatInterval)
	s.Tick(2+hb, out)
	if out.Len() != 1 || frameType(out, 0) != wire.TypeHeartbeat {
		t.Fatalf("idle ended stream without negotiation: %d frames", out.Len())
	}
	out.Reset()
	// A receiver negotiates: the marker replaces the heartbeat.
	s.Handle(statusFrame(wire.Status{ReceiverID: 5, Serial: 1, Delivered: 3, Highest: 3, Window: 100, Flags: wire.StatusSynced}), sc.Dest, 3+hb, out)
	out.Reset()
	found := false
	for at := 3 + hb; at < 3+4*hb && !found; at += hb / 4 {
		s.Tick(at, out)
		for i := range out.Len() {
			if frameType(out, i) == wire.TypeSessionEnd {
				m, to := out.Msg(i)
				e, _ := wire.ParseSessionEnd(m[wire.HeaderSize:])
				found = e.Final == 3 && e.SenderID == s.ID() && to == sc.Dest
			}
		}
		out.Reset()
	}
	if !found || s.Stats().SessionEnds != 1 || !s.Ended() {
		t.Fatalf("no marker for seq 3 after negotiation (stats %+v)", s.Stats())
	}
}

func frameType(v *batch.Vec, i int) uint16 {
	m, _ := v.Msg(i)
	return le.Uint16(m[2:])
}

// TestSessionEndGroup ends a multicast stream whose tail one receiver
// lost: it NAKs the tail on hearing the marker, gets it, and every
// receiver reports the stream ended — and, idle afterwards, not silent.
func TestSessionEndGroup(t *testing.T) {
	const records = 2000
	h := newGroupHarness(t, groupOpt{n: 3, latency: 50 * time.Microsecond, seed: 4,
		dropFirst: func(i int, seq uint64) bool { return i == 1 && seq > records-5 }})
	for range records {
		h.send(1)
		h.step()
		h.f.Advance(10 * time.Microsecond)
	}
	if !h.s.End(h.now(), h.sOut) {
		t.Fatal("no marker: the receivers negotiated long ago")
	}
	h.flush(h.f.S, h.sOut)
	if _, err := h.s.Send(100, h.pay, h.now(), h.sOut); !errors.Is(err, ErrEnded) {
		t.Fatalf("Send after End: %v", err)
	}
	for range 3000 { // 3 s idle, in 1 ms steps
		h.step()
		h.f.Advance(time.Millisecond)
	}
	h.check(records)
	for i, r := range h.rs {
		final, done := r.Ended()
		if !done || final != records {
			t.Errorf("receiver %d: ended %v at %d", i, done, final)
		}
		if r.PeerSilent() || r.Stats().PeerSilences != 0 {
			t.Errorf("receiver %d reported an ended stream silent", i)
		}
	}
	if st := h.rs[1].Stats(); st.SessionEnds == 0 || h.del[1].n != records {
		t.Errorf("receiver 1: %d markers heard, %d delivered", st.SessionEnds, h.del[1].n)
	}
}
