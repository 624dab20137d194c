package protocol

import "github.com/walcast/walcast/batch"

// initialWindow bounds what a fresh Sender sends before it has heard any
// Status: an unpaced producer then cannot outrun a walcast receiver's
// window before that receiver's first Status arrives. A receiver that
// never sends Status (the reference, or Status turned off) must not pay
// for it with a stall, so the window also learns, within a few round
// trips, that its receiver does not speak Status:
//
//   - A NAK before any Status: a walcast receiver sends its first Status
//     as soon as it hears the stream, in the same batch as its first NAK,
//     so a NAK with no Status statusGrace later comes from a receiver that
//     will never send one. The window is released.
//   - With no loss there is no NAK, so the window's last record is the
//     probe: instead of sending it, the Sender sends a plain heartbeat
//     naming it as the highest seq. Every receiver that heard the stream
//     NAKs a seq it knows to exist and lacks (the reference does so at
//     once), the NAK is answered from the hot ring and releases the
//     window as above; a walcast receiver's Status ends it as before. A
//     receiver that heard nothing (not started yet) answers neither and
//     stays protected until InitialWait.
//
// The bytes are the reference's kinds (data, heartbeat, NAK): the probe
// only sends one record a round trip later, after a heartbeat that
// announces it.
//
// Invariants: edge and until are set by the first check (the first Send)
// and never move: seqs ≤ edge pass, later ones wait until until, or until
// released. size 0 means off (InitialWindow < 0, or NoFlowControl:
// nothing could end the hold before InitialWait, so there is none, as in
// the reference). withheld is the seq the probe heartbeat named while it
// has not been sent yet. released, once true, stays true.
type initialWindow struct {
	size  uint64 // records
	wait  int64  // ns
	edge  uint64
	until int64 // 0: not started

	withheld uint64 // the probe's record, not sent yet (0: none)
	nakAt    int64  // when the first NAK before any Status came (0: none)
	released bool   // the receiver does not speak Status
	stats    *SenderStats
}

// statusGrace is how long after a NAK the initial window waits for a
// Status that travels with it (ns): two of a walcast receiver's default
// Status intervals, so that one lost Status does not count as none.
const statusGrace = int64(2 * DefaultStatusInterval)

func newInitialWindow(cfg *SenderConfig, hasLog bool, stats *SenderStats) initialWindow {
	w := initialWindow{wait: int64(cfg.InitialWait), stats: stats}
	if cfg.InitialWindow > 0 && !cfg.NoFlowControl {
		w.size = uint64(cfg.InitialWindow)
		if !hasLog {
			w.size = min(w.size, uint64(cfg.RingSlots)) // all of it repairable from the hot ring
		}
	}
	return w
}

// open reports whether the window holds nothing back and probes nothing
// any more (off, or released): Sender.SendBatch's fast path needs no
// check per record then.
func (w *initialWindow) open() bool { return w.size == 0 || w.released }

// holds reports whether the window holds seq next back at now.
func (w *initialWindow) holds(next uint64, now int64) bool {
	if w.size == 0 || w.released {
		return false
	}
	if w.until == 0 {
		w.edge = next - 1 + w.size
		w.until = max(now, 1) + w.wait
	}
	if w.settle(now) {
		return false
	}
	return next > w.edge && now < w.until
}

// settle releases the window once statusGrace has passed since a NAK
// with no Status; it reports whether the window is released.
func (w *initialWindow) settle(now int64) bool {
	if !w.released && w.nakAt != 0 && now-w.nakAt >= statusGrace {
		w.released = true
		w.stats.InitialReleased++
	}
	return w.released
}

// deadline lowers d to the time settle releases the window (the loop
// ticks then, so a held Send is retried without waiting for the idle
// heartbeat).
func (w *initialWindow) deadline(d int64, negotiated bool) int64 {
	if negotiated || w.released || w.nakAt == 0 {
		return d
	}
	return min(d, w.nakAt+statusGrace)
}

// nak notes a NAK heard before any Status.
func (w *initialWindow) nak(now int64) {
	if w.size != 0 && w.nakAt == 0 {
		w.nakAt = max(now, 1)
	}
}

// probes reports whether seq, about to be sent at now, should be the
// probe: the window's last record, while the window still holds (before
// until) and nothing has told it yet whether the receiver speaks Status,
// and not the stream's first record (a receiver that has heard no record
// yet cannot NAK one). Once InitialWait has passed the window holds
// nothing back, so there is nothing to learn and the record goes out as
// it is.
func (w *initialWindow) probes(seq uint64, now int64) bool {
	return w.size >= 2 && w.until != 0 && now < w.until && seq == w.edge && !w.released && w.nakAt == 0
}

// sendProbe sends, in place of seq's first transmission (its frame is in
// the hot ring), a plain heartbeat naming seq as the highest sent. False:
// out has no room for it (seq goes out as usual).
func (s *Sender) sendProbe(seq uint64, now int64, out *batch.Vec) bool {
	if out.Full() || !s.heartbeat(now, out) {
		return false
	}
	s.fc.initial.withheld = seq
	s.stats.InitialProbes++
	return true
}

// sendWithheld sends the probe's record ahead of the next one once the
// window no longer holds, unless a NAK has had it retransmitted already.
func (s *Sender) sendWithheld(now int64, out *batch.Vec) {
	seq := s.fc.initial.withheld
	s.fc.initial.withheld = 0
	if sl, frame := s.ring.lookup(seq); sl != nil && sl.retxAt == never && s.em.emit(frame, seq, out) {
		sl.retxAt = now
	}
}
