package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

func (s *Sender) cache(seq uint64, n int) {
	i := seq & s.mask
	s.slotSeq[i] = seq
	s.slotLen[i] = int32(n)
	s.retxAt[i] = never
}

// canCoalesce reports whether a data frame of n bytes with seq s.next can
// be appended to the last message of out.
func (s *Sender) canCoalesce(out *batch.Vec, n int) bool {
	return s.coalesceWith(out, n, s.next)
}

func (s *Sender) coalesceWith(out *batch.Vec, n int, seq uint64) bool {
	if !s.cfg.Coalesce || s.coal.vec != out || out.Len() == 0 || out.Len()-1 != s.coal.idx || s.coal.next != seq {
		return false
	}
	m, _ := out.Msg(s.coal.idx)
	if len(m) != s.coal.n || s.coal.n+n > s.cfg.MaxFrame || s.coal.n+n > out.SlotSize() {
		return false
	}
	// The message must still be ours: its last frame is the data record
	// seq−1 (the caller may have reset out and appended something else,
	// e.g. a NAK, at the same index).
	last := m[len(m)-s.coal.last:]
	typ := le.Uint16(last[2:])
	return !wal.IsControl(typ) && le.Uint64(last[wal.HeaderSize:]) == seq-1
}

// emit appends a data frame to out, coalescing it with the previous data
// datagram when configured. It returns false when out had no room.
func (s *Sender) emit(frame []byte, seq uint64, out *batch.Vec) bool {
	if s.coalesceWith(out, len(frame), seq) {
		buf := out.Buf(s.coal.idx)
		copy(buf[s.coal.n:], frame)
		s.coal.n += len(frame)
		s.coal.last = len(frame)
		out.Set(s.coal.idx, s.coal.n, s.cfg.Dest)
		s.coal.next = seq + 1
		return true
	}
	if !out.Append(frame, s.cfg.Dest) {
		return false
	}
	if s.cfg.Coalesce {
		s.coal.vec, s.coal.idx, s.coal.n, s.coal.last, s.coal.next = out, out.Len()-1, len(frame), len(frame), seq+1
	}
	return true
}
