package wire

import (
	"errors"
	"fmt"
)

// The session end marker (type 0x16, walcast extension): the
// sender says the stream is done, so a receiver tells "done" from
// "silent". MoldUDP64 has an end-of-session packet; the reference has
// nothing.
//
// Payload, 64 bytes, little-endian:
//
//	[0..8)   zero: where a data record has its seq. A reference receiver
//	         takes any type but 0x11/0x12 for data and drops seq 0, so the
//	         marker never reaches its application.
//	[8..16)  final: the last seq of the stream (0: nothing was sent)
//	[16..24) sender_id: the probes' sender id (0: none)
//	[24..64) zero
//
// Like the probe, the marker is negotiated: a Sender sends it only after a
// receiver has shown (by a valid Status) that it speaks the extensions.

// SessionEnd is the payload of a session end marker.
type SessionEnd struct {
	Final    uint64 // last seq of the stream; 0: none was sent
	SenderID uint64
}

// ErrSessionEnd matches a payload ParseSessionEnd rejects.
var ErrSessionEnd = errors.New("wire: bad session end marker")

// Put writes the 64-byte payload into p[0:64].
func (e SessionEnd) Put(p []byte) {
	_ = p[ControlPayloadSize-1]
	clear(p[:ControlPayloadSize])
	le.PutUint64(p[8:], e.Final)
	le.PutUint64(p[16:], e.SenderID)
}

// ParseSessionEnd reads a session end payload: at least 64 bytes, the
// seq slot zero.
func ParseSessionEnd(p []byte) (SessionEnd, error) {
	if len(p) < ControlPayloadSize {
		return SessionEnd{}, fmt.Errorf("%w: %d-byte payload", ErrSessionEnd, len(p))
	}
	if le.Uint64(p) != 0 {
		return SessionEnd{}, fmt.Errorf("%w: seq slot not zero", ErrSessionEnd)
	}
	return SessionEnd{Final: le.Uint64(p[8:]), SenderID: le.Uint64(p[16:])}, nil
}

// PutSessionEndFrame writes a complete marker frame into dst[0:80] and
// returns its size.
func PutSessionEndFrame(dst []byte, e SessionEnd) int {
	e.Put(dst[HeaderSize:ControlFrameSize])
	_ = Seal(dst[:ControlFrameSize], TypeSessionEnd)
	return ControlFrameSize
}
