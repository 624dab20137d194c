package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCRCVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want uint32
	}{
		{"check string", []byte("123456789"), 0xE3069283},
		{"empty", nil, 0},
		{"64 zero bytes", make([]byte, 64), 0x03C8EB67},
	} {
		if got := CRC(tc.in); got != tc.want {
			t.Errorf("%s: CRC = %#08x, want %#08x", tc.name, got, tc.want)
		}
	}
}

func TestHeaderDecodeExample(t *testing.T) {
	b := mustHex(t, "01000201030400000506070800000000")
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{Version: 1, Type: 0x0102, Len: 0x0403, CRC: 0x08070605}
	if h != want {
		t.Fatalf("got %+v, want %+v", h, want)
	}
	var out [16]byte
	h.Put(out[:])
	if !bytes.Equal(out[:], b) {
		t.Fatalf("re-encode: % x, want % x", out, b)
	}
}

func TestHeaderRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"15 bytes", make([]byte, 15), ErrShort},
		{"version 0", append([]byte{0}, make([]byte, 15)...), ErrVersion},
		{"version 0xff", append([]byte{0xff}, make([]byte, 15)...), ErrVersion},
	} {
		_, err := ParseHeader(tc.in)
		if err != tc.want || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want %v (and ErrCorrupt)", tc.name, err, tc.want)
		}
	}
	h := Header{Type: 100}
	var b [16]byte
	h.Put(b[:])
	if b[0] != Version {
		t.Fatalf("new header carries version %d, want %d", b[0], Version)
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Golden frames from the spec (§1), computed with Go's Castagnoli table.
func TestGoldenFrames(t *testing.T) {
	frame := func(f func([]byte) int) []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = 0xAA // prove every byte is written
		}
		return b[:f(b)]
	}
	data := make([]byte, 16+64)
	data[16] = 1
	if err := Seal(data, 100); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		got     []byte
		header  string
		payload []byte
	}{
		{"heartbeat", frame(func(b []byte) int { return PutHeartbeatFrame(b, Heartbeat{Highest: 5}) }),
			"01001200 40000000 9cce11a2 00000000", payloadWith(64, 0, 5)},
		{"nak", frame(func(b []byte) int { return PutNakFrame(b, Nak{From: 2, Count: 3}) }),
			"01001100 40000000 9a25e64c 00000000", payloadWith(64, 0, 2, 8, 3)},
		{"replication request", frame(func(b []byte) int {
			return PutReplicationRequestFrame(b, ReplicationRequest{Stream: 1, From: 2})
		}), "01001300 40000000 64c9bf4e 00000000", payloadWith(64, 0, 1, 8, 2)},
		{"data", data, "01006400 40000000 6504c677 00000000", payloadWith(64, 0, 1)},
		// walcast's additions (docs/protocol.md § Skip markers and replay
		// damage).
		{"skip restart 6…70001", frame(func(b []byte) int {
			return PutSkipFrame(b, Skip{Seq: 70001, From: 6, Reason: SkipRestart})
		}), "01001700 40000000 6d108442 00000000", payloadWith(64, 0, 0x71, 1, 0x11, 2, 1, 8, 6, 16, 1)},
		{"skip repair 1500", frame(func(b []byte) int {
			return PutSkipFrame(b, Skip{Seq: 1500, From: 1500, Reason: SkipRepair})
		}), "01001700 40000000 ffd7fc98 00000000", payloadWith(64, 0, 0xdc, 1, 5, 8, 0xdc, 9, 5, 16, 2)},
		{"replication request with ReplayExt", frame(func(b []byte) int {
			return PutReplicationRequestFrame(b, ReplicationRequest{Stream: 1, From: 2, Flags: ReplayExt})
		}), "01001300 40000000 60d49652 00000000", payloadWith(64, 0, 1, 8, 2, 16, 1)},
		{"not available, damaged at 1500", frame(func(b []byte) int {
			return PutNotAvailableFrame(b, NotAvailable{Requested: 1500, Oldest: 1, Highest: 3000, Stream: 1, Damaged: 1500})
		}), "01001500 40000000 f8f5c1c2 00000000", payloadWith(64, 0, 0xdc, 1, 5, 8, 1, 16, 0xb8, 17, 0xb, 24, 1, 32, 0xdc, 33, 5)},
		{"not available, reference (same, no Damaged)", frame(func(b []byte) int {
			return PutNotAvailableFrame(b, NotAvailable{Requested: 1500, Oldest: 1, Highest: 3000, Stream: 1})
		}), "01001500 40000000 370bf876 00000000", payloadWith(64, 0, 0xdc, 1, 5, 8, 1, 16, 0xb8, 17, 0xb, 24, 1)},
	} {
		want := append(mustHex(t, tc.header), tc.payload...)
		if !bytes.Equal(tc.got, want) {
			t.Errorf("%s:\n got % x\nwant % x", tc.name, tc.got, want)
		}
		h, p, n, err := DecodeFrame(tc.got)
		if err != nil || n != len(want) || len(p) != 64 || h.Len != 64 {
			t.Errorf("%s: decode: %+v len(p)=%d n=%d err=%v", tc.name, h, len(p), n, err)
		}
	}
}

// payloadWith returns an n-byte payload with single bytes set at offsets:
// pairs of (offset, value).
func payloadWith(n int, kv ...int) []byte {
	p := make([]byte, n)
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = byte(kv[i+1])
	}
	return p
}

func TestControlRoundTrip(t *testing.T) {
	p := make([]byte, CaughtUpPayloadSize)
	n := Nak{From: 1<<63 + 7, Count: 42}
	n.Put(p)
	if got, _ := ParseNak(p); got != n {
		t.Errorf("nak: %+v", got)
	}
	h := Heartbeat{Highest: 99}
	h.Put(p)
	if got, _ := ParseHeartbeat(p); got != h {
		t.Errorf("heartbeat: %+v", got)
	}
	r := ReplicationRequest{Stream: 0xdeadbeef, From: 12345}
	r.Put(p)
	if got, _ := ParseReplicationRequest(p); got != r || le.Uint32(p[4:]) != 0 {
		t.Errorf("request: %+v", got)
	}
	na := NotAvailable{Requested: 1, Oldest: 2, Highest: 3, Stream: 4}
	na.Put(p)
	if got, _ := ParseNotAvailable(p); got != na || p[24] != 4 {
		t.Errorf("notavailable: %+v", got)
	}
	for i := range p {
		p[i] = 0xff
	}
	c := CaughtUp{TsNs: 5, Stream: 6, LiveSeq: 7}
	c.Put(p)
	if got, _ := ParseCaughtUp(p); got != c {
		t.Errorf("caughtup: %+v", got)
	}
	if !bytes.Equal(p[32:], make([]byte, 96)) || !bytes.Equal(p[20:24], make([]byte, 4)) {
		t.Errorf("caughtup padding not zero: % x", p)
	}
	for _, f := range []func([]byte) error{
		func(b []byte) error { _, err := ParseNak(b); return err },
		func(b []byte) error { _, err := ParseHeartbeat(b); return err },
		func(b []byte) error { _, err := ParseReplicationRequest(b); return err },
		func(b []byte) error { _, err := ParseNotAvailable(b); return err },
		func(b []byte) error { _, err := ParseCaughtUp(b); return err },
	} {
		if err := f(make([]byte, 63)); err != ErrPayload {
			t.Errorf("short payload: err = %v, want ErrPayload", err)
		}
	}
	if TypeNak != 0x11 || TypeHeartbeat != 0x12 || TypeReplicationRequest != 0x13 {
		t.Error("control type numbers changed")
	}
}

func TestCRCCoversPayloadOnly(t *testing.T) {
	b := make([]byte, ControlFrameSize)
	PutNakFrame(b, Nak{From: 9, Count: 1})
	b[12] ^= 0xff // reserved header byte
	b[1] ^= 0xff  // pad0
	if _, _, _, err := DecodeFrame(b); err != nil {
		t.Fatalf("header byte flip broke the frame: %v", err)
	}
	b[40] ^= 1
	if _, _, _, err := DecodeFrame(b); err != ErrCRC {
		t.Fatalf("payload flip: err = %v, want ErrCRC", err)
	}
}

func TestDecodeFrameErrors(t *testing.T) {
	b := make([]byte, ControlFrameSize)
	PutHeartbeatFrame(b, Heartbeat{Highest: 1})
	if _, _, _, err := DecodeFrame(b[:ControlFrameSize-1]); err != ErrLen {
		t.Errorf("truncated payload: %v", err)
	}
	two := append(append([]byte{}, b...), b...)
	_, _, n, err := DecodeFrame(two)
	if err != nil || n != ControlFrameSize {
		t.Errorf("coalesced: n=%d err=%v", n, err)
	}
	if _, _, _, err := DecodeFrame(two[n:]); err != nil {
		t.Errorf("second coalesced frame: %v", err)
	}
	if err := Seal(make([]byte, HeaderSize+MaxPayload+1), 100); err != ErrLen {
		t.Errorf("oversize seal: %v", err)
	}
	if err := Seal(make([]byte, 3), 100); err != ErrShort {
		t.Errorf("short seal: %v", err)
	}
	if Seq([]byte{1, 2, 3}) != 0 {
		t.Error("Seq of a short payload must be 0")
	}
}

func TestRandomHeadersNeverPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 16)
	for range 100_000 {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		h, err := ParseHeader(b)
		if (err == nil) != (b[0] == Version) {
			t.Fatalf("% x: err=%v", b, err)
		}
		_ = h
		_, _, _, _ = DecodeFrame(b)
	}
}

func TestCodecAllocs(t *testing.T) {
	b := make([]byte, 16+128)
	Seal(b, 100)
	var sink uint64
	allocs := testing.AllocsPerRun(1000, func() {
		if err := Seal(b, 100); err != nil {
			t.Fatal(err)
		}
		h, p, _, err := DecodeFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		sink += uint64(h.Len) + Seq(p)
		_, err = ParseHeader(b[:3])
		if err == nil {
			t.Fatal("want error")
		}
		PutNakFrame(b, Nak{From: 1, Count: 2})
	})
	if allocs != 0 {
		t.Fatalf("codec allocates %v per run", allocs)
	}
	_ = sink
}

func FuzzDecodeFrame(f *testing.F) {
	b := make([]byte, ControlFrameSize)
	PutNakFrame(b, Nak{From: 2, Count: 3})
	f.Add(b)
	f.Add([]byte{1})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, p, n, err := DecodeFrame(in)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if n != HeaderSize+int(h.Len) || len(p) != int(h.Len) || CRC(p) != h.CRC {
			t.Fatalf("accepted inconsistent frame: %+v n=%d", h, n)
		}
		// Re-sealing an accepted frame reproduces its meaningful bytes.
		out := append([]byte(nil), in[:n]...)
		if err := Seal(out, h.Type); err != nil {
			t.Fatal(err)
		}
		h2, _, _, err := DecodeFrame(out)
		if err != nil || h2 != h {
			t.Fatalf("reseal: %+v vs %+v (%v)", h2, h, err)
		}
	})
}

func FuzzControlPayloads(f *testing.F) {
	f.Add(make([]byte, 128))
	f.Fuzz(func(t *testing.T, p []byte) {
		if n, err := ParseNak(p); err == nil {
			q := make([]byte, 64)
			n.Put(q)
			if m, _ := ParseNak(q); m != n {
				t.Fatal("nak round trip")
			}
		}
		if c, err := ParseCaughtUp(p); err == nil {
			q := make([]byte, 128)
			c.Put(q)
			if d, _ := ParseCaughtUp(q); d != c {
				t.Fatal("caughtup round trip")
			}
		}
		_, _ = ParseHeartbeat(p)
		_, _ = ParseReplicationRequest(p)
		_, _ = ParseNotAvailable(p)
	})
}

func BenchmarkCRC128(b *testing.B) {
	p := make([]byte, 128)
	b.SetBytes(128)
	b.ReportAllocs()
	for b.Loop() {
		CRC(p)
	}
}

func BenchmarkSeal144(b *testing.B) {
	f := make([]byte, 144)
	b.ReportAllocs()
	for b.Loop() {
		_ = Seal(f, 100)
	}
}

func BenchmarkDecodeFrame144(b *testing.B) {
	f := make([]byte, 144)
	_ = Seal(f, 100)
	b.ReportAllocs()
	for b.Loop() {
		_, _, _, _ = DecodeFrame(f)
	}
}

func BenchmarkNakEncode(b *testing.B) {
	f := make([]byte, ControlFrameSize)
	b.ReportAllocs()
	for b.Loop() {
		PutNakFrame(f, Nak{From: 1, Count: 2})
	}
}
