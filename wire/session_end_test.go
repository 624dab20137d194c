package wire

import (
	"bytes"
	"errors"
	"testing"
)

// goldenEndHex is the session end marker of a stream whose last seq is
// 1 000 000, from sender 0xfedcba9876543210. docs/protocol.md shows the
// same bytes; the CRC was cross-checked with a bitwise CRC-32C.
const goldenEndHex = "01001600 40000000 6158ce8d 00000000" +
	"0000000000000000 40420f0000000000 1032547698badcfe" +
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"

func TestSessionEndGolden(t *testing.T) {
	e := SessionEnd{Final: 1_000_000, SenderID: 0xfedcba9876543210}
	buf := make([]byte, ControlFrameSize)
	if n := PutSessionEndFrame(buf, e); n != ControlFrameSize || !bytes.Equal(buf, mustHex(t, goldenEndHex)) {
		t.Fatalf("marker\n got  %x\n want %x", buf, mustHex(t, goldenEndHex))
	}
	h, p, _, err := DecodeFrame(buf)
	if err != nil || h.Type != TypeSessionEnd || !UDPControl(h.Type) {
		t.Fatalf("%+v %v", h, err)
	}
	if got, err := ParseSessionEnd(p); err != nil || got != e {
		t.Fatalf("parse %+v %v", got, err)
	}
	// A reference receiver takes an unknown type for data and reads its
	// seq at offset 0: 0, which it drops.
	if Seq(p) != 0 {
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
