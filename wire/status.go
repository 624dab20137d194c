package wire

import "errors"

// ErrStatus is returned by ParseStatus for a payload that is not a valid
// Status (shorter than 64 bytes, receiver id 0, or an unknown state).
var ErrStatus = errors.New("wire: invalid Status payload")

// Receiver states (Status.State): the sticky state of the receiver that
// sent the Status, the values of protocol.OutcomeKind.
const (
	StateLive            uint8 = 0
	StateFaulted         uint8 = 1
	StateReconnect       uint8 = 2
	StateSenderRestarted uint8 = 3
)

// Status flags (Status.Flags).
const (
	// StatusSynced: the receiver has a stream position; Delivered and
	// Window are meaningful. A receiver that has not yet seen a record
	// sends Status without it, and the sender does not throttle on it.
	StatusSynced uint8 = 1 << 0
	// StatusClosing: the receiver is shutting down; the sender drops it
	// from flow control at once.
	StatusClosing uint8 = 1 << 1
)

// Status is the payload of a TypeStatus frame, sent by a receiver to its
// sender: cumulative acknowledgement, flow-control window, identity,
// an echoed sender timestamp for RTT, and the receiver's sticky state.
// Layout (64 bytes, little-endian, padding zero):
//
//	[0..8)   Delivered  u64  every seq ≤ Delivered was delivered in order (0: none)
//	[8..16)  Highest    u64  highest seq the receiver knows to exist
//	[16..24) ReceiverID u64  random, nonzero, fixed for one Receiver value
//	[24..32) EchoTS     u64  TS of the last probe heard (sender's clock, ns); 0: none
//	[32..36) EchoHold   u32  ns from hearing that probe to sending this Status
//	[36..40) Window     u32  the sender may send seqs ≤ Delivered + Window
//	[40..44) ReNak      u32  the receiver's current re-NAK delay, ns (0: fixed timers)
//	[44..48) Serial     u32  +1 per Status of this receiver (wraps)
//	[48]     State      u8   0 live, 1 faulted, 2 reconnect, 3 sender restarted
//	[49]     Flags      u8   StatusSynced | StatusClosing
//	[50..64) zero
type Status struct {
	Delivered  uint64
	Highest    uint64
	ReceiverID uint64
	EchoTS     uint64
	EchoHold   uint32
	Window     uint32
	ReNak      uint32
	Serial     uint32
	State      uint8 // StateLive … StateSenderRestarted
	Flags      uint8
}

// Edge is the highest seq the receiver accepts: Delivered + Window.
func (s Status) Edge() uint64 { return s.Delivered + uint64(s.Window) }

// Put writes the 64-byte payload into p[0:64] (padding zero).
func (s Status) Put(p []byte) {
	_ = p[ControlPayloadSize-1]
	clear(p[:ControlPayloadSize])
	le.PutUint64(p[0:], s.Delivered)
	le.PutUint64(p[8:], s.Highest)
	le.PutUint64(p[16:], s.ReceiverID)
	le.PutUint64(p[24:], s.EchoTS)
	le.PutUint32(p[32:], s.EchoHold)
	le.PutUint32(p[36:], s.Window)
	le.PutUint32(p[40:], s.ReNak)
	le.PutUint32(p[44:], s.Serial)
	p[48] = s.State
	p[49] = s.Flags
}

// ParseStatus decodes a Status payload. It returns ErrStatus when p is
// shorter than 64 bytes, the receiver id is 0 or the state is unknown.
// Padding and unknown flag bits are ignored.
func ParseStatus(p []byte) (Status, error) {
	if len(p) < ControlPayloadSize {
		return Status{}, ErrStatus
	}
	s := Status{
		Delivered:  le.Uint64(p[0:]),
		Highest:    le.Uint64(p[8:]),
		ReceiverID: le.Uint64(p[16:]),
		EchoTS:     le.Uint64(p[24:]),
		EchoHold:   le.Uint32(p[32:]),
		Window:     le.Uint32(p[36:]),
		ReNak:      le.Uint32(p[40:]),
		Serial:     le.Uint32(p[44:]),
		State:      p[48],
		Flags:      p[49],
	}
	if s.ReceiverID == 0 || s.State > StateSenderRestarted {
		return Status{}, ErrStatus
	}
	return s, nil
}

// PutStatusFrame writes a complete Status frame into dst[0:80] and
// returns its size. dst must hold ControlFrameSize bytes.
func PutStatusFrame(dst []byte, s Status) int {
	s.Put(dst[HeaderSize:ControlFrameSize])
	_ = Seal(dst[:ControlFrameSize], TypeStatus)
	return ControlFrameSize
}

// Probe is the payload of a walcast sender's heartbeat once a receiver
// has negotiated (sent a valid Status): the reference heartbeat's
// highest_seq followed, in bytes the reference writes as zero and never
// reads, by a timestamp the receiver echoes in its next Status, the
// sender's id and its RTT estimate. A heartbeat whose TS is 0 is a plain
// (reference) heartbeat. Layout (64 bytes):
//
//	[0..8)   Highest  u64  highest seq sent, as the reference heartbeat
//	[8..16)  TS       u64  sender's clock when sent, ns; nonzero
//	[16..24) SenderID u64  random, nonzero, fixed for one Sender value
//	[24..28) SRTT     u32  sender's smoothed RTT, ns (0: no sample yet)
//	[28..32) RTTVar   u32  its variation, ns
//	[32..64) zero
type Probe struct {
	Highest  uint64
	TS       uint64
	SenderID uint64
	SRTT     uint32
	RTTVar   uint32
}

// Put writes the 64-byte heartbeat payload into p[0:64] (padding zero).
func (h Probe) Put(p []byte) {
	_ = p[ControlPayloadSize-1]
	clear(p[:ControlPayloadSize])
	le.PutUint64(p[0:], h.Highest)
	le.PutUint64(p[8:], h.TS)
	le.PutUint64(p[16:], h.SenderID)
	le.PutUint32(p[24:], h.SRTT)
	le.PutUint32(p[28:], h.RTTVar)
}

// ParseProbe decodes a heartbeat payload in its extended form. A plain
// reference heartbeat decodes with TS 0. It returns ErrPayload when p
// is shorter than 64 bytes.
func ParseProbe(p []byte) (Probe, error) {
	if len(p) < ControlPayloadSize {
		return Probe{}, ErrPayload
	}
	return Probe{
		Highest:  le.Uint64(p[0:]),
		TS:       le.Uint64(p[8:]),
		SenderID: le.Uint64(p[16:]),
		SRTT:     le.Uint32(p[24:]),
		RTTVar:   le.Uint32(p[28:]),
	}, nil
}

// PutProbeFrame writes a complete heartbeat frame carrying h into
// dst[0:80] and returns its size.
func PutProbeFrame(dst []byte, h Probe) int {
	h.Put(dst[HeaderSize:ControlFrameSize])
	_ = Seal(dst[:ControlFrameSize], TypeHeartbeat)
	return ControlFrameSize
}
