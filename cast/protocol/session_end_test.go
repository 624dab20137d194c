package protocol

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

// goldenEndHex is the session end marker of a stream whose last seq is
// 1 000 000, from sender 0xfedcba9876543210. docs/protocol.md shows the
// same bytes; the CRC was cross-checked with a bitwise CRC-32C.
const goldenEndHex = "01001600 40000000 6158ce8d 00000000" +
	"0000000000000000 40420f0000000000 1032547698badcfe" +
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"

func TestSessionEndGolden(t *testing.T) {
	e := SessionEnd{Final: 1_000_000, SenderID: 0xfedcba9876543210}
	buf := make([]byte, wal.ControlFrameSize)
	if n := PutSessionEndFrame(buf, e); n != wal.ControlFrameSize || !bytes.Equal(buf, unhex(t, goldenEndHex)) {
		t.Fatalf("marker\n got  %x\n want %x", buf, unhex(t, goldenEndHex))
	}
	h, p, _, err := wal.DecodeFrame(buf)
	if err != nil || h.Type != TypeSessionEnd || !IsControl(h.Type) {
		t.Fatalf("%+v %v", h, err)
	}
	if got, err := ParseSessionEnd(p); err != nil || got != e {
		t.Fatalf("parse %+v %v", got, err)
	}
	// A reference receiver takes an unknown type for data and reads its
	// seq at offset 0: 0, which it drops.
	if wal.Seq(p) != 0 {
		t.Fatal("the seq slot is not zero")
	}
	if _, err := ParseSessionEnd(p[:63]); !errors.Is(err, ErrSessionEnd) {
		t.Fatalf("short payload: %v", err)
	}
	bad := bytes.Clone(p)
	bad[0] = 1
	if _, err := ParseSessionEnd(bad); !errors.Is(err, ErrSessionEnd) {
		t.Fatalf("nonzero seq slot: %v", err)
	}
}

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
	hb := sc.HeartbeatInterval
	s.Tick(2+hb, out)
	if out.Len() != 1 || frameType(out, 0) != wal.TypeHeartbeat {
		t.Fatalf("idle ended stream without negotiation: %d frames", out.Len())
	}
	out.Reset()
	// A receiver negotiates: the marker replaces the heartbeat.
	s.Handle(statusFrame(Status{ReceiverID: 5, Serial: 1, Delivered: 3, Highest: 3, Window: 100, Flags: StatusSynced}), sc.Dest, 3+hb, out)
	out.Reset()
	found := false
	for at := 3 + hb; at < 3+4*hb && !found; at += hb / 4 {
		s.Tick(at, out)
		for i := range out.Len() {
			if frameType(out, i) == TypeSessionEnd {
				m, to := out.Msg(i)
				e, _ := ParseSessionEnd(m[wal.HeaderSize:])
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
