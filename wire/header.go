package wire

import (
	"encoding/binary"
	"errors"
)

// HeaderSize is the size of the frame header in bytes.
const HeaderSize = 16

// Version is the only header version this package writes or accepts.
const Version = 1

// MaxPayload is the protocol ceiling of a payload in bytes (len is a u16).
const MaxPayload = 65535

// Header is the decoded 16-byte frame header. Pad and reserved bytes are
// written as zero and not checked on read.
type Header struct {
	Version uint8
	Type    uint16 // record type, see the Type constants
	Len     uint16 // payload length in bytes
	CRC     uint32 // CRC-32C of the payload bytes only
}

// ErrCorrupt matches every decoding error of this package:
// errors.Is(err, ErrCorrupt) is true for ErrShort, ErrVersion, ErrLen and
// ErrCRC.
var ErrCorrupt = errors.New("wire: corrupt record")

type corruptError struct{ msg string }

func (e *corruptError) Error() string        { return e.msg }
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

// Decoding errors. They are preallocated so that rejecting a datagram on a
// hot path allocates nothing.
var (
	ErrShort   error = &corruptError{"wire: frame shorter than its 16-byte header"}
	ErrVersion error = &corruptError{"wire: unknown header version"}
	ErrLen     error = &corruptError{"wire: payload length exceeds the bytes present"}
	ErrCRC     error = &corruptError{"wire: payload CRC32C mismatch"}
	ErrPayload error = &corruptError{"wire: payload too short for its record type"}
)

// Put writes h into b[0:16], with version forced to [Version] when h.Version
// is zero and all pad and reserved bytes zero. b must be at least
// HeaderSize bytes long.
func (h Header) Put(b []byte) {
	_ = b[15]
	v := h.Version
	if v == 0 {
		v = Version
	}
	b[0] = v
	b[1] = 0
	binary.LittleEndian.PutUint16(b[2:], h.Type)
	binary.LittleEndian.PutUint16(b[4:], h.Len)
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint32(b[8:], h.CRC)
	binary.LittleEndian.PutUint32(b[12:], 0)
}

// ParseHeader decodes the first 16 bytes of b. It returns ErrShort when b is
// shorter than a header and ErrVersion when the version is not 1. It does
// not check the payload.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	h := Header{
		Version: b[0],
		Type:    binary.LittleEndian.Uint16(b[2:]),
		Len:     binary.LittleEndian.Uint16(b[4:]),
		CRC:     binary.LittleEndian.Uint32(b[8:]),
	}
	if h.Version != Version {
		return h, ErrVersion
	}
	return h, nil
}

// DecodeFrame decodes the frame at the start of b: header, payload length
// and CRC. It returns the header, the payload (a sub-slice of b, owned by
// the caller of DecodeFrame) and the total frame size in bytes, so a
// datagram holding several consecutive frames is walked with
// b = b[size:]. Bytes after the frame are not inspected.
func DecodeFrame(b []byte) (h Header, payload []byte, size int, err error) {
	h, err = ParseHeader(b)
	if err != nil {
		return h, nil, 0, err
	}
	end := HeaderSize + int(h.Len)
	if end > len(b) {
		return h, nil, 0, ErrLen
	}
	payload = b[HeaderSize:end]
	var c uint32
	if crcFast {
		c = ^crc3way(^uint32(0), payload, &crcShift)
	} else {
		c = crcTable(payload)
	}
	if c != h.CRC {
		return h, nil, 0, ErrCRC
	}
	return h, payload, end, nil
}

// Seal turns frame into a complete record of type typ: frame must hold the
// 16 header bytes followed by the payload (frame[16:]); Seal computes the
// CRC of the payload once and writes the header in place. It returns
// ErrLen when the payload exceeds [MaxPayload] and ErrShort when frame is
// shorter than a header.
func Seal(frame []byte, typ uint16) error {
	if len(frame) < HeaderSize {
		return ErrShort
	}
	n := len(frame) - HeaderSize
	if n > MaxPayload {
		return ErrLen
	}
	var c uint32
	if crcFast {
		c = ^crc3way(^uint32(0), frame[HeaderSize:], &crcShift)
	} else {
		c = crcTable(frame[HeaderSize:])
	}
	Header{Type: typ, Len: uint16(n), CRC: c}.Put(frame)
	return nil
}

// Seq returns the sequence number of a data record: the first u64 of its
// payload. It returns 0 (the invalid seq) when the payload is shorter than
// 8 bytes.
func Seq(payload []byte) uint64 {
	if len(payload) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(payload)
}
