package protocol

import (
	"encoding/binary"

	"github.com/walcast/walcast/wire"
)

var le = binary.LittleEndian

// BadCounts counts dropped datagrams (or frames of a coalesced datagram)
// by the reason they were rejected.
type BadCounts struct {
	Short        uint64 // shorter than the 16-byte header
	Version      uint64 // header version ≠ 1
	Len          uint64 // 16 + len exceeds the bytes present
	CRC          uint64 // payload CRC-32C mismatch
	SeqZero      uint64 // data record with seq 0
	ShortPayload uint64 // data payload < 8 bytes, control payload < 64 bytes
	// Trailing counts coalesced datagrams whose bytes after the last
	// whole frame were too short for a header; they are ignored (the
	// spec ignores bytes beyond 16 + len).
	Trailing uint64
}

// Total is the number of rejected datagrams or frames (Trailing excluded).
func (b BadCounts) Total() uint64 {
	return b.Short + b.Version + b.Len + b.CRC + b.SeqZero + b.ShortPayload
}

func (b *BadCounts) count(err error, first bool) {
	switch err {
	case wire.ErrShort:
		if first {
			b.Short++
		} else {
			b.Trailing++
		}
	case wire.ErrVersion:
		b.Version++
	case wire.ErrLen:
		b.Len++
	case wire.ErrCRC:
		b.CRC++
	default:
		b.ShortPayload++
	}
}
