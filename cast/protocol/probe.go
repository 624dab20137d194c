package protocol

import "math"

// prober decides when a heartbeat goes out in the probe form on its own
// (not on the idle timer) while receivers are negotiated, and keeps the
// sender's RTT estimate over every receiver's echoes: a probe at once
// when there is news for the receivers (a receiver joined, the first RTT
// sample, a NAK for seqs never sent), a tail-loss probe when data went
// out that some receiver has not reported and pto has passed since, and
// an RTT probe every RTTProbeInterval while data flows.
//
// Invariants: tail probes back off, doubling from pto up to the heartbeat
// interval, until the next Status (heard resets the back-off); lastProbe
// is the last heartbeat sent in the probe form, lastData the last first
// transmission (never: none yet).
type prober struct {
	rtt       RTT
	lastData  int64
	lastProbe int64
	probeAt   int64 // earliest next tail probe
	backoff   uint  // tail probes sent since the last Status
	owed      bool  // a probe is due at once

	floor, interval, hbEvery int64 // ProbeFloor, RTTProbeInterval, HeartbeatInterval
	stats                    *SenderStats

	// sent are the timestamps of the last probes sent (a ring, oldest at
	// sentI): an echo of one of them proves that a receiver reads this
	// sender's probes, which a blind forger cannot (see
	// flowController.slotFor). A probe younger than the heartbeat
	// interval is never overwritten: while the ring holds only such
	// probes, heartbeats go out in the plain form and due probes wait
	// (room). Forged joins, NAKs and Status frames can each make a probe
	// due, so without this bound a flood would push a real receiver's
	// probe out of the ring before its echo came back, and it could
	// never prove itself.
	sent  [probeRing]int64
	sentI int
}

// probeRing is how many probe timestamps the sender remembers: at most
// probeRing probes per heartbeat interval go out in the probe form. A
// stream of short bursts needs a tail-loss probe or two per burst, and a
// due probe that finds no room waits until the oldest one is a heartbeat
// interval old, so the bound is set well above what genuine traffic asks
// for (5 120 probes/s at the default 100 ms heartbeat: a lost-tail burst
// every 0.4 ms) while a flood of forged Status frames still cannot make
// the sender probe faster. echoes scans the ring once per echo heard.
const probeRing = 512

// probeKind says why a probe is due.
type probeKind uint8

const (
	noProbe probeKind = iota
	owedProbe
	tailProbe
	rttProbe
)

// ptoUnknown is the tail-loss probe timeout before any RTT sample, ns (at
// most the heartbeat interval).
const ptoUnknown = 10_000_000

func newProber(cfg *SenderConfig, stats *SenderStats) prober {
	p := prober{
		lastData:  never,
		lastProbe: never,
		floor:     int64(cfg.ProbeFloor),
		interval:  int64(cfg.RTTProbeInterval),
		hbEvery:   int64(cfg.HeartbeatInterval),
		stats:     stats,
	}
	for i := range p.sent {
		p.sent[i] = never
	}
	return p
}

// roomAt is the earliest time a heartbeat may go out in the probe form:
// when the oldest remembered probe is a heartbeat interval old.
func (p *prober) roomAt() int64 { return p.sent[p.sentI] + p.hbEvery }

// room reports whether a heartbeat at now may go out in the probe form.
func (p *prober) room(now int64) bool { return now >= p.roomAt() }

// RTT returns the sender's estimate over every receiver's echoes.
func (s *Sender) RTT() RTT { return s.probe.rtt }

// pto is the tail-loss probe timeout: 2·srtt within [ProbeFloor,
// HeartbeatInterval]; ptoUnknown (at most the heartbeat) before any
// sample.
func (p *prober) pto() int64 {
	if !p.rtt.Valid() {
		return min(ptoUnknown, p.hbEvery)
	}
	return clamp(2*p.rtt.SRTT(), p.floor, p.hbEvery)
}

// heard takes the news of an accepted Status: a joined receiver and the
// first RTT sample are announced at once, and tail probes start over.
func (p *prober) heard(n statusNews) {
	if n.joined {
		p.owed = true // an RTT sample, and the probe form, at once
	}
	if n.echo {
		p.rtt.Sample(n.rtt)
		if p.rtt.Samples() == 1 {
			p.owed = true // the receivers learn the first estimate at once
		}
	}
	p.backoff = 0
	p.probeAt = 0
}

// due reports which probe, if any, is due at now; uncovered says some
// receiver has not reported the highest seq sent.
func (p *prober) due(now int64, uncovered bool) probeKind {
	switch {
	case !p.room(now):
		return noProbe
	case p.owed:
		return owedProbe
	case uncovered && now-p.lastData >= p.pto() && now >= p.probeAt:
		return tailProbe
	case p.lastData > p.lastProbe && now-p.lastProbe >= p.interval:
		return rttProbe
	}
	return noProbe
}

// sentProbe records a heartbeat sent in the probe form at now.
func (p *prober) sentProbe(now int64) {
	p.lastProbe = now
	p.owed = false
	p.stats.Probes++
	p.sent[p.sentI] = max(now, 1)
	p.sentI = (p.sentI + 1) % len(p.sent)
}

// echoes reports whether ts is the timestamp of one of the last probes
// sent.
func (p *prober) echoes(ts int64) bool {
	if ts <= 0 {
		return false
	}
	// Newest first: an echo is almost always of one of the last probes,
	// and the ring is long (probeRing) so that floods cannot churn it.
	for i := range len(p.sent) {
		if p.sent[(p.sentI-1-i+2*len(p.sent))%len(p.sent)] == ts {
			return true
		}
	}
	return false
}

// sentDue records that the probe due took the heartbeat just sent.
func (p *prober) sentDue(k probeKind, now int64) {
	switch k {
	case tailProbe:
		p.stats.TailProbes++
		p.probeAt = now + min(p.pto()<<min(p.backoff+1, 20), p.hbEvery)
		p.backoff++
	case rttProbe:
		p.stats.RTTProbes++
	}
}

// deadline lowers d to the next owed, tail or RTT probe, none before
// there is room for it.
func (p *prober) deadline(d int64, uncovered bool) int64 {
	next := d
	if p.owed {
		next = math.MinInt64
	}
	if uncovered {
		next = min(next, max(p.lastData+p.pto(), p.probeAt))
	}
	if p.lastData > p.lastProbe {
		next = min(next, p.lastProbe+p.interval)
	}
	return min(d, max(next, p.roomAt()))
}
