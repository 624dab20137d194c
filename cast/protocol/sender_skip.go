package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// skipMarker is the log's Skip marker (the frame it wrote when it opened
// past seqs a crash left unused): seqs from … seq−1 have no record, and
// the marker, itself record seq, answers NAKs for them. Invariant: seq is
// 0 when the log wrote none; due until the marker's first transmission.
type skipMarker struct {
	from, seq uint64
	frame     []byte
	due       bool
}

// sendSkip sends the log's Skip marker before the Sender's first record,
// whether Send or Tick comes first: receivers learn at once which seqs
// will never have a record, and which of those they delivered (a crashed
// sender had sent them before they were durable). It is an ordinary
// record of the log (NAKed and repaired like any), so a lost marker is
// asked for again. It returns false when out had no room.
func (s *Sender) sendSkip(now int64, out *batch.Vec) bool {
	if !s.em.emit(s.skip.frame, s.skip.seq, out) {
		return false
	}
	s.stats.SkipsSent++
	s.skip.due = false
	s.timerInit = true
	s.lastSend = now
	return true
}

// learnSkip takes the log's Skip marker (the frame it wrote on open): it
// is cached in the hot ring when it is the last record, and remembered so
// that NAKs for the seqs it stands for are answered with it.
func (s *Sender) learnSkip(frame []byte) {
	h, p, n, err := wire.DecodeFrame(frame)
	if err != nil || h.Type != wire.TypeSkip {
		return
	}
	sk, err := wire.ParseSkip(p)
	if err != nil || sk.Seq >= s.next {
		return
	}
	s.skip = skipMarker{from: sk.From, seq: sk.Seq, frame: append([]byte(nil), frame[:n]...), due: true}
	if sk.Seq == s.next-1 {
		s.ring.put(sk.Seq, frame[:n])
	}
}
