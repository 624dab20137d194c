// Package saw is the classic stop-and-wait ARQ the reference tools
// measured against: every datagram starts with a 5-byte header — a
// big-endian u32 sequence number and a type byte, 0x01 DATA or 0x02
// ACK — DATA carries the payload after it, ACK nothing. The sender sends
// one DATA, waits up to 200 ms for its ACK and retransmits forever; the
// receiver ACKs every DATA it keeps (including duplicates) and delivers
// each sequence number once, in order. Loss is injected by dropping at
// the receiver, as the classic `receiver -drop PCT` did.
package saw

import (
	"encoding/binary"
	"fmt"

	"github.com/walcast/walcast/bench/peers"
)

// Header layout.
const (
	HeaderLen = 5
	TypeData  = 0x01
	TypeAck   = 0x02
)

// PutHeader writes seq and typ into b[:5].
func PutHeader(b []byte, seq uint32, typ byte) {
	binary.BigEndian.PutUint32(b, seq)
	b[4] = typ
}

// Parse checks one datagram and returns its seq, type and payload (a
// sub-slice of b). ACKs must be exactly 5 bytes.
func Parse(b []byte) (seq uint32, typ byte, payload []byte, err error) {
	if len(b) < HeaderLen {
		return 0, 0, nil, fmt.Errorf("saw: %d-byte datagram: %w", len(b), peers.ErrCorrupt)
	}
	seq, typ = binary.BigEndian.Uint32(b), b[4]
	switch typ {
	case TypeData:
		return seq, typ, b[HeaderLen:], nil
	case TypeAck:
		if len(b) != HeaderLen {
			return 0, 0, nil, fmt.Errorf("saw: %d-byte ACK: %w", len(b), peers.ErrCorrupt)
		}
		return seq, typ, nil, nil
	}
	return 0, 0, nil, fmt.Errorf("saw: type 0x%02x: %w", typ, peers.ErrCorrupt)
}
