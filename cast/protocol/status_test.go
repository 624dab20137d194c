package protocol

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/walcast/walcast/wal"
)

// Golden frames of the walcast extensions. docs/protocol.md shows the
// same bytes; change neither without the other.
var (
	goldenStatus = Status{
		Delivered: 1000, Highest: 1003, ReceiverID: 0x0123456789abcdef,
		EchoTS: 5_000_000, EchoHold: 12_000, Window: 2048, ReNak: 200_000,
		Serial: 7, State: Live, Flags: StatusSynced,
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

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStatusGolden(t *testing.T) {
	want := unhex(t, goldenStatusHex)
	buf := make([]byte, wal.ControlFrameSize)
	if n := PutStatusFrame(buf, goldenStatus); n != wal.ControlFrameSize || !bytes.Equal(buf, want) {
		t.Fatalf("Status frame\n got  %x\n want %x", buf, want)
	}
	h, p, _, err := wal.DecodeFrame(want)
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
	want := unhex(t, goldenProbeHex)
	buf := make([]byte, wal.ControlFrameSize)
	if n := PutProbeFrame(buf, goldenProbe); n != wal.ControlFrameSize || !bytes.Equal(buf, want) {
		t.Fatalf("probe frame\n got  %x\n want %x", buf, want)
	}
	h, p, _, err := wal.DecodeFrame(want)
	if err != nil || h.Type != wal.TypeHeartbeat {
		t.Fatalf("decode: %+v %v", h, err)
	}
	got, err := ParseProbe(p)
	if err != nil || got != goldenProbe {
		t.Fatalf("ParseProbe = %+v, %v", got, err)
	}
	// A reference receiver reads only highest_seq.
	if hb, _ := wal.ParseHeartbeat(p); hb.Highest != 5 {
		t.Fatalf("reference view of the probe: highest %d", hb.Highest)
	}
	// A plain heartbeat is a probe with TS 0, and a probe with every
	// extension zero is byte for byte the reference heartbeat.
	plain := make([]byte, wal.ControlFrameSize)
	wal.PutHeartbeatFrame(plain, wal.Heartbeat{Highest: 5})
	if got, _ := ParseProbe(plain[wal.HeaderSize:]); got != (Probe{Highest: 5}) {
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

func TestIsControl(t *testing.T) {
	for typ := uint16(0); typ < 0x40; typ++ {
		want := typ == 0x10 || typ == 0x11 || typ == 0x12 || typ == 0x14 || typ == 0x16
		if IsControl(typ) != want {
			t.Errorf("IsControl(%#x) = %v", typ, !want)
		}
	}
}

func TestRTTEstimator(t *testing.T) {
	var e RTT
	if e.Valid() || e.Timeout(10, 1000) != 1000 {
		t.Fatal("empty estimator must give the ceiling")
	}
	e.Sample(0)
	e.Sample(-5)
	if e.Samples() != 0 {
		t.Fatal("non-positive samples must be ignored")
	}
	e.Sample(800)
	if e.SRTT() != 800 || e.RTTVar() != 400 {
		t.Fatalf("first sample: srtt %d rttvar %d", e.SRTT(), e.RTTVar())
	}
	e.Sample(400) // RFC 6298: rttvar = ¾·400 + ¼·|800−400| = 400, srtt = ⅞·800 + ⅛·400 = 750
	if e.SRTT() != 750 || e.RTTVar() != 400 {
		t.Fatalf("second sample: srtt %d rttvar %d", e.SRTT(), e.RTTVar())
	}
	for i := 0; i < 200; i++ {
		e.Sample(100)
	}
	if e.SRTT() < 100 || e.SRTT() > 110 || e.RTTVar() > 10 {
		t.Fatalf("steady 100: srtt %d rttvar %d", e.SRTT(), e.RTTVar())
	}
	if to := e.Timeout(500, 1000); to != 500 {
		t.Fatalf("timeout below the floor = %d", to)
	}
	var s RTT
	s.Seed(1000, 100)
	if s.SRTT() != 1000 || s.Timeout(0, 1e9) != 1400 {
		t.Fatalf("seeded: %d %d", s.SRTT(), s.Timeout(0, 1e9))
	}
	s.Sample(200)
	s.Seed(5000, 0) // ignored once a sample exists
	if s.SRTT() != 200 {
		t.Fatalf("first own sample must replace the seed: %d", s.SRTT())
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
