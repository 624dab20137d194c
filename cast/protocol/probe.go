package protocol

import "github.com/walcast/walcast/batch"

// RTT returns the sender's estimate over every receiver's echoes.
func (s *Sender) RTT() RTT { return s.fc.rtt }

// pto is the tail-loss probe timeout: 2·srtt within [ProbeFloor,
// HeartbeatInterval]; 10 ms (at most the heartbeat) before any sample.
func (s *Sender) pto() int64 {
	if !s.fc.rtt.Valid() {
		return min(10_000_000, s.cfg.HeartbeatInterval)
	}
	return clamp(2*s.fc.rtt.SRTT(), s.cfg.ProbeFloor, s.cfg.HeartbeatInterval)
}

// uncovered reports whether some live negotiated receiver has not yet
// reported the highest seq sent.
func (s *Sender) uncovered() bool {
	return s.fc.active > 0 && s.next > 1 && s.fc.covered < s.next-1
}

// flowTick drops silent receivers and sends the probes that are due.
// It returns true when it sent a heartbeat.
func (s *Sender) flowTick(now int64, out *batch.Vec) bool {
	fc := &s.fc
	changed := false
	for i := range fc.rcv {
		r := &fc.rcv[i]
		if r.used && now-r.info.LastHeard >= s.cfg.ReceiverTimeout {
			s.event(ReceiverLost, now, r, 0)
			s.dropReceiver(r)
			changed = true
		}
	}
	if fc.blockedAt != 0 && now-fc.blockedAt >= s.cfg.ReceiverTimeout {
		// Held back for ReceiverTimeout by receivers that delivered
		// nothing meanwhile: the producer is not their hostage. A
		// receiver still repairing a gap (it knows of seqs past what it
		// delivered) is left to its own budgets: its retry budget or
		// silence rule ends in a sticky state, which releases it, while a
		// repair the loaded machine merely delayed goes on (releasing it
		// let the sender run past its window: Reconnect at 30 % loss).
		for i := range fc.rcv {
			if r := &fc.rcv[i]; r.used && r.info.Throttles && r.info.Edge < s.next && r.info.Highest <= r.info.Delivered {
				r.info.Stalled = true
				s.event(ReceiverStalled, now, r, 0)
				changed = true
			}
		}
		fc.blockedAt = 0
	}
	if changed {
		s.foldLimit()
	}
	if fc.active == 0 {
		fc.probeNow = false
		return false
	}
	if s.health != nil && s.health.Err() != nil {
		return false // no heartbeat of any form while the log fails (see Tick)
	}
	var tail, rtt bool
	switch {
	case fc.probeNow:
	case s.uncovered() && now-fc.lastData >= s.pto() && now >= fc.probeAt:
		tail = true
	case fc.lastData > fc.lastProbe && now-fc.lastProbe >= s.cfg.RTTProbeInterval:
		rtt = true
	default:
		return false
	}
	if !s.heartbeat(now, out) {
		return false // out is full: due again on the next Tick
	}
	switch {
	case tail:
		s.stats.TailProbes++
		fc.probeAt = now + min(s.pto()<<min(fc.backoff+1, 20), s.cfg.HeartbeatInterval)
		fc.backoff++
	case rtt:
		s.stats.RTTProbes++
	}
	return true
}
