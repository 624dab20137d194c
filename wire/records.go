package wire

import "encoding/binary"

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
// (0 = from the oldest record the server holds). Flags are walcast's
// capability bits in payload bytes 16..20, zero in the reference: a server
// sends walcast's extensions only to a client that set them.
type ReplicationRequest struct {
	Stream uint32
	From   uint64
	Flags  uint32
}

// ReplicationRequest flags.
const (
	// ReplayExt: the client understands Skip records (0x17) on the stream
	// and the Damaged field of a NotAvailable, which may then also arrive
	// mid-stream.
	ReplayExt uint32 = 1
)

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
// Damaged (walcast, payload bytes 32..40, sent only to a client that set
// [ReplayExt]) is the seq at which the server's log is damaged: every
// record before it was sent, it cannot be. Such a NotAvailable may come
// mid-stream.
type NotAvailable struct {
	Requested uint64
	Oldest    uint64
	Highest   uint64
	Stream    uint32
	Damaged   uint64
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
	le.PutUint32(p[16:], r.Flags)
}

// ParseReplicationRequest decodes a ReplicationRequest payload; ErrPayload
// when shorter than 64 bytes.
func ParseReplicationRequest(p []byte) (ReplicationRequest, error) {
	if len(p) < ControlPayloadSize {
		return ReplicationRequest{}, ErrPayload
	}
	return ReplicationRequest{Stream: le.Uint32(p[0:]), From: le.Uint64(p[8:]), Flags: le.Uint32(p[16:])}, nil
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
	le.PutUint64(p[32:], n.Damaged)
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
		Damaged:   le.Uint64(p[32:]),
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

// Skip is the payload of a Skip marker (type [TypeSkip], 64 bytes): the
// record at seq Seq stands for the seqs From…Seq, none of which has a
// record of its own. [0..8) seq u64 (the record's own seq, as for every
// data record), [8..16) from u64, [16..20) reason u32, [20..64) zero.
//
// A log has a hole in its seqs only between two segments, and the segment
// after the hole starts with the Skip that explains it. Two reasons write
// one: a writer that crashed had reserved (and may have sent) seqs it
// never made durable, so on restart it continues past its reservation
// ([SkipRestart]); `cast wal repair` replaced damaged records
// ([SkipRepair]).
type Skip struct {
	Seq    uint64
	From   uint64
	Reason uint32
}

// Skip reasons.
const (
	// SkipRestart: seqs From…Seq−1 were reserved by a writer that crashed
	// before they were durable. A consumer that delivered records with
	// these seqs holds content the log never had: it must drop them.
	SkipRestart uint32 = 1
	// SkipRepair: the records From…Seq were damaged on disk and moved to
	// a quarantine file by a repair. Copies a consumer delivered earlier
	// passed their CRC and are authentic; the log no longer has them.
	SkipRepair uint32 = 2
)

// SkipPayloadSize is the payload size of a Skip marker in bytes.
const SkipPayloadSize = 64

// SkipFrameSize is the size of a Skip marker frame in bytes.
const SkipFrameSize = HeaderSize + SkipPayloadSize

// Put writes the 64-byte payload into p[0:64] (padding zero).
func (s Skip) Put(p []byte) {
	_ = p[SkipPayloadSize-1]
	zero(p[:SkipPayloadSize])
	le.PutUint64(p[0:], s.Seq)
	le.PutUint64(p[8:], s.From)
	le.PutUint32(p[16:], s.Reason)
}

// ParseSkip decodes a Skip payload: ErrPayload when shorter than 64 bytes
// or when From is 0 or above Seq.
func ParseSkip(p []byte) (Skip, error) {
	if len(p) < SkipPayloadSize {
		return Skip{}, ErrPayload
	}
	s := Skip{Seq: le.Uint64(p[0:]), From: le.Uint64(p[8:]), Reason: le.Uint32(p[16:])}
	if s.From == 0 || s.From > s.Seq {
		return Skip{}, ErrPayload
	}
	return s, nil
}

// Lost returns the seqs a consumer whose last delivered seq was last
// received although they are in the Skip's range: From…min(last, Seq).
// ok is false when there are none.
func (s Skip) Lost(last uint64) (from, to uint64, ok bool) {
	if last < s.From {
		return 0, 0, false
	}
	return s.From, min(last, s.Seq), true
}

// PutSkipFrame writes a complete Skip marker frame into dst[0:80] and
// returns its size.
func PutSkipFrame(dst []byte, s Skip) int {
	s.Put(dst[HeaderSize:SkipFrameSize])
	_ = Seal(dst[:SkipFrameSize], TypeSkip)
	return SkipFrameSize
}
