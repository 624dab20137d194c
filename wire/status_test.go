package wire

import (
	"bytes"
	"testing"
)

// Golden frames of the walcast extensions. docs/protocol.md shows the
// same bytes; change neither without the other.
var (
	goldenStatus = Status{
		Delivered: 1000, Highest: 1003, ReceiverID: 0x0123456789abcdef,
		EchoTS: 5_000_000, EchoHold: 12_000, Window: 2048, ReNak: 200_000,
		Serial: 7, State: StateLive, Flags: StatusSynced,
	}
	goldenStatusHex = "01001000 40000000 77a020b9 00000000" + // header: v1, type 0x10, len 64, crc
		"e803000000000000 eb03000000000000 efcdab8967452301 404b4c0000000000" +
		"e02e0000 00080000 400d0300 07000000 00 01 0000000000000000000000000000"

	goldenProbe = Probe{Highest: 5, TS: 1_000_000_000, SenderID: 0xfedcba9876543210, SRTT: 20_000, RTTVar: 5_000}
	// goldenProbeHex is the heartbeat frame a walcast sender sends once a
	// receiver has negotiated; the spec's golden heartbeat highest_seq=5
	// is the same frame with payload bytes 8..32 zero.
	goldenProbeHex = "01001200 40000000 7a67d021 00000000" +
		"0500000000000000 00ca9a3b00000000 1032547698badcfe 204e0000 88130000" +
		"0000000000000000000000000000000000000000000000000000000000000000"
)

func TestStatusGolden(t *testing.T) {
	want := mustHex(t, goldenStatusHex)
	buf := make([]byte, ControlFrameSize)
	if n := PutStatusFrame(buf, goldenStatus); n != ControlFrameSize || !bytes.Equal(buf, want) {
		t.Fatalf("Status frame\n got  %x\n want %x", buf, want)
	}
	h, p, _, err := DecodeFrame(want)
	if err != nil || h.Type != TypeStatus || h.Len != 64 {
		t.Fatalf("decode: %+v %v", h, err)
	}
	got, err := ParseStatus(p)
	if err != nil || got != goldenStatus {
		t.Fatalf("ParseStatus = %+v, %v; want %+v", got, err, goldenStatus)
	}
	if got.Edge() != 3048 {
		t.Fatalf("Edge = %d, want 3048", got.Edge())
	}
}

func TestProbeGolden(t *testing.T) {
	want := mustHex(t, goldenProbeHex)
	buf := make([]byte, ControlFrameSize)
	if n := PutProbeFrame(buf, goldenProbe); n != ControlFrameSize || !bytes.Equal(buf, want) {
		t.Fatalf("probe frame\n got  %x\n want %x", buf, want)
	}
	h, p, _, err := DecodeFrame(want)
	if err != nil || h.Type != TypeHeartbeat {
		t.Fatalf("decode: %+v %v", h, err)
	}
	got, err := ParseProbe(p)
	if err != nil || got != goldenProbe {
		t.Fatalf("ParseProbe = %+v, %v", got, err)
	}
	// A reference receiver reads only highest_seq.
	if hb, _ := ParseHeartbeat(p); hb.Highest != 5 {
		t.Fatalf("reference view of the probe: highest %d", hb.Highest)
	}
	// A plain heartbeat is a probe with TS 0, and a probe with every
	// extension zero is byte for byte the reference heartbeat.
	plain := make([]byte, ControlFrameSize)
	PutHeartbeatFrame(plain, Heartbeat{Highest: 5})
	if got, _ := ParseProbe(plain[HeaderSize:]); got != (Probe{Highest: 5}) {
		t.Fatalf("plain heartbeat as probe: %+v", got)
	}
	PutProbeFrame(buf, Probe{Highest: 5})
	if !bytes.Equal(buf, plain) {
		t.Fatalf("zero probe differs from the reference heartbeat")
	}
}

func TestStatusRejects(t *testing.T) {
	p := make([]byte, 64)
	goldenStatus.Put(p)
	for _, tc := range []struct {
		name string
		mod  func(p []byte) []byte
	}{
		{"short", func(p []byte) []byte { return p[:63] }},
		{"receiver id 0", func(p []byte) []byte { clear(p[16:24]); return p }},
		{"unknown state", func(p []byte) []byte { p[48] = 4; return p }},
	} {
		q := append([]byte(nil), p...)
		if _, err := ParseStatus(tc.mod(q)); err != ErrStatus {
			t.Errorf("%s: err = %v, want ErrStatus", tc.name, err)
		}
	}
	// Padding and unknown flags are ignored (room for later fields).
	q := append([]byte(nil), p...)
	q[49] |= 0x80
	q[63] = 0xff
	if s, err := ParseStatus(q); err != nil || s.Delivered != 1000 {
		t.Fatalf("padding: %+v %v", s, err)
	}
}

// TestPredicates pins the two rules apart: Reserved is exactly
// 0x10–0x17 (what no application may publish), UDPControl exactly the
// five types a UDP receiver never delivers, all of them reserved.
func TestPredicates(t *testing.T) {
	for i := 0; i <= 0xffff; i++ {
		typ := uint16(i)
		reserved := typ >= 0x10 && typ <= 0x17
		control := typ == 0x10 || typ == 0x11 || typ == 0x12 || typ == 0x14 || typ == 0x16
		if Reserved(typ) != reserved {
			t.Errorf("Reserved(%#x) = %v", typ, !reserved)
		}
		if UDPControl(typ) != control {
			t.Errorf("UDPControl(%#x) = %v", typ, !control)
		}
	}
}

// FuzzStatus: ParseStatus never panics, and what it accepts re-encodes
// to the same fields.
func FuzzStatus(f *testing.F) {
	p := make([]byte, 64)
	goldenStatus.Put(p)
	f.Add(p)
	f.Add(make([]byte, 64))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatus(b)
		if _, perr := ParseProbe(b); (perr == nil) != (len(b) >= 64) {
			t.Fatalf("ParseProbe on %d bytes: %v", len(b), perr)
		}
		if err != nil {
			return
		}
		q := make([]byte, 64)
		s.Put(q)
		s2, err := ParseStatus(q)
		if err != nil || s2 != s {
			t.Fatalf("round trip %+v → %+v (%v)", s, s2, err)
		}
	})
}
