package protocol

import "testing"

// TestProber: which probe is due — one owed at once, a tail-loss probe
// once pto passed since data some receiver has not reported (backing
// off, doubling, until the next Status), an RTT probe every
// RTTProbeInterval while data flows — and which echoes are its own.
func TestProber(t *testing.T) {
	cfg := senderCfg()
	cfg.HeartbeatInterval, cfg.ProbeFloor, cfg.RTTProbeInterval = 100_000, 1_000, 50_000
	cfg = cfg.withDefaults()
	var st SenderStats
	p := newProber(&cfg, &st)
	if p.pto() != min(ptoUnknown, 100_000) {
		t.Fatalf("pto before any sample %d", p.pto())
	}
	p.heard(statusNews{accepted: true, joined: true, echo: true, rtt: 2_000})
	if p.pto() != 4_000 || !p.owed {
		t.Fatalf("pto %d (want 2·srtt = 4000), owed %v", p.pto(), p.owed)
	}
	for _, s := range []struct {
		name      string
		now       int64
		data      bool // a first transmission at now, before the check
		uncovered bool
		want      probeKind
		send      bool // the due probe goes out
	}{
		{name: "owed: at once", now: 10, want: owedProbe, send: true},
		{name: "nothing to say", now: 20, want: noProbe},
		{name: "data out, not yet pto", now: 100, data: true, uncovered: true, want: noProbe},
		{name: "pto passed: tail probe", now: 4_100, uncovered: true, want: tailProbe, send: true},
		{name: "backing off: 2·pto", now: 12_099, uncovered: true, want: noProbe},
		{name: "after the back-off", now: 12_100, uncovered: true, want: tailProbe, send: true},
		{name: "backing off: 4·pto", now: 28_099, uncovered: true, want: noProbe},
		{name: "covered, no data since the probe: nothing", now: 30_000, want: noProbe},
		{name: "RTT probe while data flows", now: 62_100, data: true, want: rttProbe, send: true},
		{name: "no new data: no RTT probe", now: 200_000, want: noProbe},
	} {
		if s.data {
			p.lastData = s.now
		}
		k := p.due(s.now, s.uncovered)
		if k != s.want {
			t.Fatalf("%s: due %d, want %d", s.name, k, s.want)
		}
		if s.send {
			p.sentProbe(s.now)
			p.sentDue(k, s.now)
		}
	}
	if st.Probes != 4 || st.TailProbes != 2 || st.RTTProbes != 1 {
		t.Fatalf("probes %d, tail %d, rtt %d", st.Probes, st.TailProbes, st.RTTProbes)
	}
	p.heard(statusNews{accepted: true})
	if p.backoff != 0 || p.probeAt != 0 || p.owed {
		t.Fatalf("a Status did not reset the back-off: %d %d %v", p.backoff, p.probeAt, p.owed)
	}
	for _, c := range []struct {
		ts   int64
		want bool
	}{{10, true}, {62_100, true}, {11, false}, {0, false}, {-5, false}} {
		if got := p.echoes(c.ts); got != c.want {
			t.Errorf("echoes(%d) = %v", c.ts, got)
		}
	}
}

// TestProberBurstTails: a stream of short bursts, each with its own
// lost tail, gets a tail-loss probe for every burst one pto after it,
// as long as the bursts come no faster than the ring allows; a ring
// that allowed too few probes per heartbeat interval made later tails
// wait up to the heartbeat interval.
func TestProberBurstTails(t *testing.T) {
	cfg := senderCfg()
	cfg = cfg.withDefaults()
	var st SenderStats
	p := newProber(&cfg, &st)
	p.heard(statusNews{accepted: true, joined: true, echo: true, rtt: 20_000})
	p.sentProbe(1)
	p.sentDue(owedProbe, 1)
	const gap = 500_000 // a burst every 0.5 ms for three heartbeat intervals
	bursts := int(3 * int64(cfg.HeartbeatInterval) / gap)
	now := int64(1_000_000)
	for i := range bursts {
		p.lastData = now
		at := now + p.pto()
		if k := p.due(at, true); k != tailProbe {
			t.Fatalf("burst %d of %d: due %d at pto, want a tail probe (ring of %d per %v)", i, bursts, k, probeRing, cfg.HeartbeatInterval)
		}
		p.sentProbe(at)
		p.sentDue(tailProbe, at)
		p.heard(statusNews{accepted: true, echo: true, rtt: 20_000}) // the repair's Status
		now += gap
	}
	if int(st.TailProbes) != bursts {
		t.Fatalf("%d tail probes for %d bursts", st.TailProbes, bursts)
	}
}
