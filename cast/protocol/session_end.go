package protocol

import (
	"errors"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// The session end marker (type 0x16, wire.SessionEnd) closes a stream
// explicitly: the sender says it is done, so a receiver tells "done" from
// "silent". Like the probe it is negotiated: a Sender sends it only after
// a receiver has shown (by a valid Status) that it speaks the extensions.

// ErrEnded is returned by Send and SendFrame after End: the stream is
// closed. It allocates nothing.
var ErrEnded = errors.New("cast: stream ended (Sender.End)")

// End closes the stream at the highest seq sent: Send and SendFrame
// return ErrEnded from now on, NAKs are still served (from the hot ring
// and the WAL), and in place of the idle heartbeat the Sender repeats the
// session end marker every HeartbeatInterval, so a receiver that lost it
// or joins late learns where the stream ends and NAKs its tail. The
// marker goes out only once a receiver negotiated (a valid Status);
// before that End only stops the stream (a reference receiver sees the
// heartbeats go on). End appends the first marker to out at once and
// reports whether it did. Calling it again does nothing.
func (s *Sender) End(now int64, out *batch.Vec) bool {
	if s.ended {
		return false
	}
	s.ended = true
	return s.endMarker(now, out)
}

// Ended reports whether End was called.
func (s *Sender) Ended() bool { return s.ended }

// endMarker appends the marker when the stream is ended and negotiated.
func (s *Sender) endMarker(now int64, out *batch.Vec) bool {
	if !s.ended || !s.fc.negotiated {
		return false
	}
	buf := out.Next()
	if len(buf) < wire.ControlFrameSize {
		return false
	}
	n := wire.PutSessionEndFrame(buf, wire.SessionEnd{Final: s.next - 1, SenderID: s.id})
	out.Commit(n, s.cfg.Dest)
	s.lastSend = now
	s.stats.SessionEnds++
	return true
}

// sessionEnd handles a marker at the Receiver: the stream ends at its
// final seq. Seqs up to it still missing are NAKed as any tail; once
// everything up to it is delivered, Ended reports the stream done.
func (r *Receiver) sessionEnd(p []byte, now int64, out *batch.Vec) {
	e, err := wire.ParseSessionEnd(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	r.stats.SessionEnds++
	r.heard(now)
	r.end.final, r.end.set = e.Final, true
	if r.expected == 0 || e.Final < r.expected {
		return
	}
	r.raise(e.Final, false, now, out) // NAKs the tail the window holds
	if now >= r.loss.nextDue {
		r.pump(now, out)
	}
}

// Ended reports whether the sender ended the stream (a session end
// marker was heard) and this Receiver has delivered every record up to
// its final seq, which it returns. A receiver that never received a
// record reports the stream ended as soon as it hears the marker.
func (r *Receiver) Ended() (final uint64, done bool) {
	return r.end.final, r.end.set && (r.expected == 0 || r.expected > r.end.final)
}
