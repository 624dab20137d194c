package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

// sendSkip sends the log's Skip marker before the Sender's first record,
// whether Send or Tick comes first: receivers learn at once which seqs
// will never have a record, and which of those they delivered (a crashed
// sender had sent them before they were durable). It is an ordinary
// record of the log (NAKed and repaired like any), so a lost marker is
// asked for again. It returns false when out had no room.
func (s *Sender) sendSkip(now int64, out *batch.Vec) bool {
	if !s.emit(s.skip.frame, s.skip.seq, out) {
		return false
	}
	s.stats.SkipsSent++
	s.skipDue = false
	s.timerInit = true
	s.lastSend = now
	return true
}

// learnSkip takes the log's Skip marker (the frame it wrote on open): it
// is cached in the hot ring when it is the last record, and remembered so
// that NAKs for the seqs it stands for are answered with it.
func (s *Sender) learnSkip(frame []byte) {
	h, p, n, err := wal.DecodeFrame(frame)
	if err != nil || h.Type != wal.TypeSkip {
		return
	}
	sk, err := wal.ParseSkip(p)
	if err != nil || sk.Seq >= s.next {
		return
	}
	s.skip.from, s.skip.seq = sk.From, sk.Seq
	s.skip.frame = append([]byte(nil), frame[:n]...)
	s.skipDue = true
	if sk.Seq == s.next-1 && n <= s.slot {
		i := sk.Seq & s.mask
		copy(s.ring[int(i)*s.slot:], frame[:n])
		s.cache(sk.Seq, n)
	}
}
