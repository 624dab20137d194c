package protocol

import (
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// What the Receiver hears from its sender: traffic that clears the
// silence rule, and heartbeats (plain or probes) that announce the
// highest seq, carry the sender's RTT estimate and tell a restart.

// senderView is what the Receiver knows of its sender from what it
// heard: whether and when, and from its probes its id, the newest probe
// ts and its RTT estimate. Invariant: silent only while clocked and no
// gap is open (the silence rule faults a stream with a gap instead).
type senderView struct {
	heard     bool   // anything valid heard (Status may go out)
	clocked   bool   // lastHeard is set (silence counts from the first Tick or frame)
	lastHeard int64  // when anything valid was last heard
	silent    bool   // silent for the silence time with no gap open (PeerSilent)
	probes    bool   // the last heartbeat was a probe: the sender honours Status
	id        uint64 // the probes' sender id
	ts        uint64 // ts of the newest probe heard from id
	srtt      int64  // the sender's RTT estimate from its last probe, ns
	rttvar    int64
}

// RTT returns the receiver's view of the round trip: the larger of its
// own NAK → retransmit estimate (which includes the sender's repair time,
// e.g. a cold read) and the sender's probe estimate (which keeps it right
// when Karn's rule starves its own: a run whose RTT grew past the re-NAK
// delay is NAKed twice and gives no sample). Samples counts its own.
//
// In a group, once it has groupOwnSamples of its own, it is its own
// estimate alone. The sender's estimate is then one for the whole group,
// fed by every member's Status echoes, and on a loaded host those carry
// the other members' time off the CPU: it stretched this receiver's
// re-NAK timer, so a repair lost on its own link waited tens of ms where
// a receiver alone asks again at once. Its own estimate cannot starve
// there (groupRTTSample measures a run NAKed more than once from its
// first NAK), and it still carries what its own repairs take: the
// sender's time, a cold read, its own time off the CPU.
func (r *Receiver) RTT() RTT { return r.loss.roundTrip(&r.peer) }

// SpeaksProbes reports whether the sender's last heartbeat was a probe:
// it has heard this receiver's Status and honours its window.
func (r *Receiver) SpeaksProbes() bool { return r.peer.probes }

func (r *Receiver) heard(now int64) {
	r.peer.lastHeard = now
	r.peer.clocked = true
	if r.peer.silent {
		r.peer.silent = false
		r.event(PeerHeard, now, 0, SkipNotice{})
	}
	r.peer.heard = true
}

func (r *Receiver) heartbeat(p []byte, now int64, out *batch.Vec) {
	hb, err := wire.ParseProbe(p)
	if err != nil {
		r.stats.Bad.ShortPayload++
		return
	}
	r.stats.Heartbeats++
	r.heard(now)
	r.peer.probes = hb.TS != 0
	sameSender := false
	if r.peer.probes {
		r.stats.Probes++
		if hb.SenderID == r.peer.id && hb.TS < r.peer.ts {
			// A probe overtaken by a newer one (reordered): old news.
			r.stats.StaleHeartbeats++
			return
		}
		sameSender = hb.SenderID == r.peer.id
		r.peer.id, r.peer.ts = hb.SenderID, hb.TS
		r.st.echo(hb.TS, now)
		r.peer.srtt, r.peer.rttvar = int64(hb.SRTT), int64(hb.RTTVar)
	}
	if r.expected == 0 {
		// StartNow, nothing heard yet: now is just after the highest seq.
		r.expected, r.highest = hb.Highest+1, hb.Highest
		if hb.Highest > 0 {
			r.late, r.lateOwed = r.expected, true
		}
		return
	}
	if hb.Highest < r.expected-1 {
		if hb.Highest >= r.live {
			// Below the replay tip but not below anything this Receiver
			// delivered: a heartbeat queued before a TCP catch-up moved the
			// tip (records served by replay are durable, so a sender with a
			// WAL cannot have lost them). Not a restart.
			r.stats.StaleHeartbeats++
			return
		}
		// Below what this Receiver delivered itself. From the sender
		// whose probes we know (same sender id), it is a probe overtaken
		// by data, not a restart. Otherwise one such datagram may be stray
		// or forged; a second within the silence time is a restart (a
		// restarted sender announces itself repeatedly).
		if sameSender {
			r.stats.StaleHeartbeats++
			return
		}
		if !r.suspect || now-r.suspectAt >= r.silence {
			r.suspect, r.suspectAt = true, now
			r.stats.RestartSuspects++
			return
		}
		r.stats.Restarts++
		r.setOutcome(Outcome{Kind: SenderRestarted, LastDelivered: r.expected - 1, Highest: hb.Highest}, now)
		return
	}
	r.suspect = false
	if hb.Highest < r.highest {
		// The sender's word on what exists: seqs announced earlier (by a
		// forged or stale heartbeat, or data beyond the window) that it
		// says it never sent are forgotten, so no phantom gap can fault.
		if low := max(hb.Highest, r.maxData); low < r.highest {
			r.highest = low
			r.stats.Lowered++
		}
		return
	}
	// Announced seqs ahead, even beyond the window: NAK what the window
	// holds and let the retry budget decide (the reference's rule).
	r.raise(hb.Highest, false, now, out)
	if now >= r.loss.nextDue {
		r.pump(now, out)
	}
}
