package wire

import "errors"

// Record types with a meaning to the transport. Every other type is a data
// record (the reference exchange's domain records use 0–5 and 7–13; the
// CLI and the examples use 1 and 100): its payload starts with its u64 seq
// ([Seq]).
const (
	// TypeCaughtUp: TCP server → client, 128-byte payload ([CaughtUp]).
	TypeCaughtUp uint16 = 6

	// TypeStatus: receiver → sender flow control and acknowledgement
	// ([Status], walcast extension, negotiated). The reference reserved
	// 0x10 for its removed StatusMessage and ignores it on its NAK socket.
	TypeStatus uint16 = 0x10
	// TypeNak: UDP receiver → sender, 64-byte payload ([Nak]).
	TypeNak uint16 = 0x11
	// TypeHeartbeat: UDP sender → receiver, 64-byte payload ([Heartbeat],
	// or [Probe] once a receiver negotiated).
	TypeHeartbeat uint16 = 0x12
	// TypeReplicationRequest: TCP client → server, 64-byte payload
	// ([ReplicationRequest]).
	TypeReplicationRequest uint16 = 0x13
	// TypeBitmapNak is reserved for a bitmap NAK (receiver → sender); no
	// one sends it yet.
	TypeBitmapNak uint16 = 0x14
	// TypeNotAvailable: TCP server → client, 64-byte payload
	// ([NotAvailable]).
	TypeNotAvailable uint16 = 0x15
	// TypeSessionEnd: "the stream is done", sender → receivers
	// ([SessionEnd], walcast extension, negotiated).
	TypeSessionEnd uint16 = 0x16
	// TypeSkip is walcast's Skip marker: a log record (it carries a seq
	// and is stored, sent, NAKed and replayed like data) saying that the
	// seqs from Skip.From up to its own seq have no record. See [Skip].
	TypeSkip uint16 = 0x17
)

// Reserved reports whether typ is one of the record types the protocol
// reserves, 0x10–0x17 (Status, NAK, Heartbeat, ReplicationRequest, bitmap
// NAK, NotAvailable, session end, Skip). An application may not publish
// them: every entry point that accepts a record refuses them with an
// error matching [ErrReserved]. Reserved is the rule for what may be sent;
// [UDPControl] is what a UDP receiver dispatches.
func Reserved(typ uint16) bool { return typ-TypeStatus <= TypeSkip-TypeStatus }

// UDPControl reports whether a UDP receiver takes a frame of type typ for
// a control frame (handled or ignored, never delivered): NAK, Heartbeat
// and walcast's Status, bitmap NAK and session end. Every other type is a
// data record to it, including three reserved ones: Skip (a log record
// with a seq), and ReplicationRequest and NotAvailable, which belong to
// the TCP replay stream and which a UDP receiver, like the reference's,
// reads as data (they carry no valid seq there). UDPControl types are all
// [Reserved]; the converse does not hold.
func UDPControl(typ uint16) bool {
	switch typ {
	case TypeStatus, TypeNak, TypeHeartbeat, TypeBitmapNak, TypeSessionEnd:
		return true
	}
	return false
}

// ErrReserved is the error for a record of a [Reserved] type offered as
// data. It is preallocated: refusing a record allocates nothing.
var ErrReserved = errors.New("wire: record types 0x10–0x17 are reserved by the protocol (Status, NAK, heartbeat, replay control, session end, Skip), not data")
