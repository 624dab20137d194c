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
