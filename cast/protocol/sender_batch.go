package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// SendBatch is Send for several records of type typ, in order: it sends
// payloads[0], payloads[1], ... until all are sent or one is refused, and
// returns how many were sent (their seqs are consecutive, the first being
// NextSeq() at the call) and the refusal's error, exactly as that Send
// would have returned it (n < len(payloads) exactly when err != nil;
// ErrBatchFull: flush out and call again with payloads[n:]).
//
// The records are those that a loop of Send would have sent, byte for
// byte, with the same frames appended to out. What it saves is the
// per-record bookkeeping that can be per-batch: in the steady state (flow
// control negotiated or off, no probe or record withheld, no skip marker
// due, frames appended as views) it checks the window and the batch's
// room once per run, not once per record, and updates the timers and
// counters once. Anything else goes through Send, one record at a time.
// It allocates nothing.
func (s *Sender) SendBatch(typ uint16, payloads [][]byte, now int64, out *batch.Vec) (n int, err error) {
	for n < len(payloads) {
		k := s.batchRoom(out, len(payloads)-n)
		if k == 0 {
			if _, err := s.Send(typ, payloads[n], now, out); err != nil {
				return n, err
			}
			n++
			continue
		}
		sent, err := s.sendRun(typ, payloads[n:n+k], out)
		if sent > 0 {
			s.lastSend = now
			s.probe.lastData = now
			s.timerInit = true
			s.stats.Sent += uint64(sent)
			n += sent
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// batchRoom is how many of want records a run of sendRun may send now: 0
// when Send must take the next one (a start-up window, a probe or record
// withheld, a skip marker due, an ended stream, coalescing or copies into
// out, no room in out or in the window), because Send handles those
// cases and their errors.
func (s *Sender) batchRoom(out *batch.Vec, want int) int {
	if s.ended || s.skip.due || !s.fc.negotiated && !s.fc.initial.open() || s.fc.initial.withheld != 0 ||
		s.em.coalesce || uint64(out.Cap()) >= s.ring.capacity() {
		return 0
	}
	k := min(want, out.Cap()-out.Len())
	if s.fc.limited {
		if s.next > s.fc.limit {
			return 0
		}
		k = int(min(uint64(k), s.fc.limit-s.next+1))
	}
	return k
}

// sendRun frames payloads (for which batchRoom made room) with the next
// seqs (the log's, with a log), caches each in the hot ring, appends a
// view of it to out and moves s.next on. It returns how many it sent,
// and the error that stopped it at the one after (a record Send would
// refuse, or the log's). The caller moves the timers and counters on.
func (s *Sender) sendRun(typ uint16, payloads [][]byte, out *batch.Vec) (int, error) {
	if wire.Reserved(typ) {
		return 0, ErrControlType
	}
	limit := min(s.cfg.MaxFrame, out.SlotSize())
	for i, p := range payloads {
		if len(p) < 8 {
			return i, ErrPayloadShort
		}
		n := wire.HeaderSize + len(p)
		if n > limit {
			return i, ErrFrameTooLarge
		}
		// Send's framing, written out here: as a shared method it is a
		// call per record the compiler does not inline (15 instructions
		// a record more in BenchmarkLoopPipe/144+batch).
		// TestSendBatchIsSendLoop holds the two to the same bytes.
		seq := s.next
		var frame []byte
		if s.log != nil {
			f, err := s.log.Append(typ, p)
			if err != nil {
				return i, err
			}
			seq = wire.Seq(f[wire.HeaderSize:])
			frame = s.ring.frameBuf(seq, len(f))
			copy(frame, f)
		} else {
			frame = s.ring.frameBuf(seq, n)
			copy(frame[wire.HeaderSize:], p)
			le.PutUint64(frame[wire.HeaderSize:], seq)
			_ = wire.Seal(frame, typ)
		}
		s.ring.cache(seq, len(frame))
		out.AppendView(frame, s.em.dest)
		s.next = seq + 1
	}
	return len(payloads), nil
}
