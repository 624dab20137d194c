package wal

import "encoding/binary"

// Record types with a meaning to the transport. Domain data records use
// 0–5 and 7–13 in the reference exchange; any type that is not a control
// type is data.
const (
	TypeCaughtUp           uint16 = 6    // TCP server → client, 128-byte payload
	TypeNak                uint16 = 0x11 // UDP receiver → sender, 64-byte payload
	TypeHeartbeat          uint16 = 0x12 // UDP sender → receiver, 64-byte payload
	TypeReplicationRequest uint16 = 0x13 // TCP client → server, 64-byte payload
	TypeNotAvailable       uint16 = 0x15 // TCP server → client, 64-byte payload
)

// Payload sizes of the control records, in bytes.
const (
	ControlPayloadSize  = 64
	CaughtUpPayloadSize = 128
	// ControlFrameSize is the size of a NAK, Heartbeat, ReplicationRequest
	// or NotAvailable frame: header plus 64-byte payload.
	ControlFrameSize = HeaderSize + ControlPayloadSize
	// CaughtUpFrameSize is the size of a CaughtUp frame.
	CaughtUpFrameSize = HeaderSize + CaughtUpPayloadSize
)

var le = binary.LittleEndian

// Nak asks the sender to retransmit Count consecutive records starting at
// From (From … From+Count−1).
type Nak struct {
	From  uint64
	Count uint64
}

// Heartbeat announces the highest seq the sender has sent (0 when none).
type Heartbeat struct {
	Highest uint64
}

// ReplicationRequest opens a TCP replay of Stream from seq From
// (0 = from the oldest record the server holds).
type ReplicationRequest struct {
	Stream uint32
	From   uint64
}

// CaughtUp tells a replay client that every record up to LiveSeq has been
// sent. Seq is always 0 as emitted; TsNs is the server's wall clock in ns
// since the Unix epoch.
type CaughtUp struct {
	Seq     uint64
	TsNs    uint64
	Stream  uint32
	LiveSeq uint64
}

// NotAvailable answers a ReplicationRequest the server cannot serve.
// Oldest and Highest are 0 when the server holds nothing for the stream.
type NotAvailable struct {
	Requested uint64
	Oldest    uint64
	Highest   uint64
	Stream    uint32
}

func zero(b []byte) {
	for i := range b {
		b[i] = 0
	}
}

// Put writes the 64-byte payload into p[0:64] (padding zero).
func (n Nak) Put(p []byte) {
	_ = p[ControlPayloadSize-1]
	zero(p[:ControlPayloadSize])
	le.PutUint64(p[0:], n.From)
	le.PutUint64(p[8:], n.Count)
}

// ParseNak decodes a NAK payload; ErrPayload when shorter than 64 bytes.
func ParseNak(p []byte) (Nak, error) {
	if len(p) < ControlPayloadSize {
		return Nak{}, ErrPayload
	}
	return Nak{From: le.Uint64(p[0:]), Count: le.Uint64(p[8:])}, nil
}

// Put writes the 64-byte payload into p[0:64] (padding zero).
func (h Heartbeat) Put(p []byte) {
	_ = p[ControlPayloadSize-1]
	zero(p[:ControlPayloadSize])
	le.PutUint64(p[0:], h.Highest)
}

// ParseHeartbeat decodes a Heartbeat payload; ErrPayload when shorter than
// 64 bytes.
func ParseHeartbeat(p []byte) (Heartbeat, error) {
	if len(p) < ControlPayloadSize {
		return Heartbeat{}, ErrPayload
	}
	return Heartbeat{Highest: le.Uint64(p[0:])}, nil
}

// Put writes the 64-byte payload into p[0:64] (padding zero).
func (r ReplicationRequest) Put(p []byte) {
	_ = p[ControlPayloadSize-1]
	zero(p[:ControlPayloadSize])
	le.PutUint32(p[0:], r.Stream)
	le.PutUint64(p[8:], r.From)
}

// ParseReplicationRequest decodes a ReplicationRequest payload; ErrPayload
// when shorter than 64 bytes.
func ParseReplicationRequest(p []byte) (ReplicationRequest, error) {
	if len(p) < ControlPayloadSize {
		return ReplicationRequest{}, ErrPayload
	}
	return ReplicationRequest{Stream: le.Uint32(p[0:]), From: le.Uint64(p[8:])}, nil
}

// Put writes the 128-byte payload into p[0:128]. Bytes 72..128 are written
// as zero (the reference leaves them unspecified; never interpret them).
func (c CaughtUp) Put(p []byte) {
	_ = p[CaughtUpPayloadSize-1]
	zero(p[:CaughtUpPayloadSize])
	le.PutUint64(p[0:], c.Seq)
	le.PutUint64(p[8:], c.TsNs)
	le.PutUint32(p[16:], c.Stream)
	le.PutUint64(p[24:], c.LiveSeq)
}

// ParseCaughtUp decodes a CaughtUp payload; ErrPayload when shorter than
// 128 bytes.
func ParseCaughtUp(p []byte) (CaughtUp, error) {
	if len(p) < CaughtUpPayloadSize {
		return CaughtUp{}, ErrPayload
	}
	return CaughtUp{
		Seq:     le.Uint64(p[0:]),
		TsNs:    le.Uint64(p[8:]),
		Stream:  le.Uint32(p[16:]),
		LiveSeq: le.Uint64(p[24:]),
	}, nil
}

// Put writes the 64-byte payload into p[0:64] (padding zero).
func (n NotAvailable) Put(p []byte) {
	_ = p[ControlPayloadSize-1]
	zero(p[:ControlPayloadSize])
	le.PutUint64(p[0:], n.Requested)
	le.PutUint64(p[8:], n.Oldest)
	le.PutUint64(p[16:], n.Highest)
	le.PutUint32(p[24:], n.Stream)
}

// ParseNotAvailable decodes a ReplicationNotAvailable payload; ErrPayload
// when shorter than 64 bytes.
func ParseNotAvailable(p []byte) (NotAvailable, error) {
	if len(p) < ControlPayloadSize {
		return NotAvailable{}, ErrPayload
	}
	return NotAvailable{
		Requested: le.Uint64(p[0:]),
		Oldest:    le.Uint64(p[8:]),
		Highest:   le.Uint64(p[16:]),
		Stream:    le.Uint32(p[24:]),
	}, nil
}

// PutNakFrame writes a complete NAK frame into dst[0:80] and returns its
// size. dst must hold ControlFrameSize bytes.
func PutNakFrame(dst []byte, n Nak) int {
	n.Put(dst[HeaderSize:ControlFrameSize])
	_ = Seal(dst[:ControlFrameSize], TypeNak)
	return ControlFrameSize
}

// PutHeartbeatFrame writes a complete Heartbeat frame into dst[0:80] and
// returns its size. dst must hold ControlFrameSize bytes.
func PutHeartbeatFrame(dst []byte, h Heartbeat) int {
	h.Put(dst[HeaderSize:ControlFrameSize])
	_ = Seal(dst[:ControlFrameSize], TypeHeartbeat)
	return ControlFrameSize
}

// PutReplicationRequestFrame writes a complete ReplicationRequest frame into
// dst[0:80] and returns its size.
func PutReplicationRequestFrame(dst []byte, r ReplicationRequest) int {
	r.Put(dst[HeaderSize:ControlFrameSize])
	_ = Seal(dst[:ControlFrameSize], TypeReplicationRequest)
	return ControlFrameSize
}

// PutNotAvailableFrame writes a complete ReplicationNotAvailable frame into
// dst[0:80] and returns its size.
func PutNotAvailableFrame(dst []byte, n NotAvailable) int {
	n.Put(dst[HeaderSize:ControlFrameSize])
	_ = Seal(dst[:ControlFrameSize], TypeNotAvailable)
	return ControlFrameSize
}

// PutCaughtUpFrame writes a complete CaughtUp frame into dst[0:144] and
// returns its size.
func PutCaughtUpFrame(dst []byte, c CaughtUp) int {
	c.Put(dst[HeaderSize:CaughtUpFrameSize])
	_ = Seal(dst[:CaughtUpFrameSize], TypeCaughtUp)
	return CaughtUpFrameSize
}
