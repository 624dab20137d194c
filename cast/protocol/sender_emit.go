package protocol

import (
	"net/netip"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// emitter appends the Sender's data frames (first sends and retransmits)
// to the caller's batch, addressed to Dest, and with Coalesce packs
// consecutive seqs into one datagram of up to MaxFrame bytes.
//
// Invariant: while the message at idx of vec is still the one emitter
// last wrote (n bytes, its last frame the data record next−1, checked
// against the bytes because the caller may reset and refill the batch),
// a frame of seq next may be appended to it; otherwise a new message
// begins.
type emitter struct {
	dest     netip.AddrPort
	coalesce bool
	maxFrame int

	vec  *batch.Vec
	idx  int
	n    int    // bytes in the message
	last int    // bytes of its last frame
	next uint64 // seq that may be appended
}

// canJoin reports whether a data frame of n bytes with seq can be
// appended to the last message of out.
func (e *emitter) canJoin(out *batch.Vec, n int, seq uint64) bool {
	if !e.coalesce || e.vec != out || out.Len() == 0 || out.Len()-1 != e.idx || e.next != seq {
		return false
	}
	m, _ := out.Msg(e.idx)
	if len(m) != e.n || e.n+n > e.maxFrame || e.n+n > out.SlotSize() {
		return false
	}
	// The message must still be ours: its last frame is the data record
	// seq−1 (the caller may have reset out and appended something else,
	// e.g. a NAK, at the same index).
	last := m[len(m)-e.last:]
	typ := le.Uint16(last[2:])
	return !wire.UDPControl(typ) && le.Uint64(last[wire.HeaderSize:]) == seq-1
}

// emitFirst is emit for a first transmission, whose frame sits in its
// hot-ring slot (ringSlots of them): without coalescing the message is a
// view of the slot, not a copy, when out holds fewer messages than the
// ring has slots, so that no Send reuses the slot before out is sent or
// reset (a caller that keeps a message longer copies it, as cast.Loop's
// backlog does). Retransmits copy (emit): an old slot may be reused
// within the same batch.
func (e *emitter) emitFirst(frame []byte, seq uint64, out *batch.Vec, ringSlots uint64) bool {
	if e.coalesce || uint64(out.Cap()) >= ringSlots {
		return e.emit(frame, seq, out)
	}
	return out.AppendView(frame, e.dest)
}

// emit appends a data frame to out, coalescing it with the previous data
// datagram when configured. It returns false when out had no room.
func (e *emitter) emit(frame []byte, seq uint64, out *batch.Vec) bool {
	if e.canJoin(out, len(frame), seq) {
		buf := out.Buf(e.idx)
		copy(buf[e.n:], frame)
		e.n += len(frame)
		e.last = len(frame)
		out.Set(e.idx, e.n, e.dest)
		e.next = seq + 1
		return true
	}
	if !out.Append(frame, e.dest) {
		return false
	}
	if e.coalesce {
		e.vec, e.idx, e.n, e.last, e.next = out, out.Len()-1, len(frame), len(frame), seq+1
	}
	return true
}
