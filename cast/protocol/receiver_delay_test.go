package protocol

import (
	"math"
	"testing"
	"time"
)

// rttOf is an estimate after one sample of d: SRTT d, RTTVar d/2, so the
// RTT timeout is 3d.
func rttOf(d time.Duration) RTT {
	var e RTT
	e.Sample(int64(d))
	return e
}

func TestRTTTimer(t *testing.T) {
	tm := rttTimer{floor: int64(ms), debounce: int64(50 * ms), groupCap: int64(500 * ms)}
	cases := []struct {
		name   string
		rtt    RTT
		probes bool
		group  int
		rt     uint16
		want   time.Duration
	}{
		{"reference sender: NakDebounce", rttOf(2 * ms), false, 1, 1, 50 * ms},
		{"reference sender, later round: still NakDebounce", rttOf(2 * ms), false, 1, 5, 50 * ms},
		{"no estimate: the cap", RTT{}, true, 1, 1, 50 * ms},
		{"no estimate in a group: the group cap", RTT{}, true, 3, 1, 500 * ms},
		{"first re-NAK: the RTT timeout", rttOf(2 * ms), true, 1, 1, 6 * ms},
		{"second: doubled", rttOf(2 * ms), true, 1, 2, 12 * ms},
		{"third: doubled again", rttOf(2 * ms), true, 1, 3, 24 * ms},
		{"fourth: doubled again", rttOf(2 * ms), true, 1, 4, 48 * ms},
		{"capped at NakDebounce alone", rttOf(2 * ms), true, 1, 5, 50 * ms},
		{"a group keeps doubling past NakDebounce", rttOf(2 * ms), true, 2, 5, 96 * ms},
		{"a group's cap", rttOf(2 * ms), true, 2, 9, 500 * ms},
		{"never below the floor", rttOf(100 * time.Microsecond), true, 1, 1, ms},
		{"a huge round does not overflow", rttOf(2 * ms), true, 2, math.MaxUint16, 500 * ms},
	}
	for _, c := range cases {
		if got := tm.delay(c.rtt, c.probes, c.group, c.rt); got != int64(c.want) {
			t.Errorf("%s: delay %v, want %v", c.name, time.Duration(got), c.want)
		}
	}
	if tm.limit(1) != int64(50*ms) || tm.limit(0) != int64(50*ms) || tm.limit(2) != int64(500*ms) {
		t.Errorf("limits %d %d %d", tm.limit(0), tm.limit(1), tm.limit(2))
	}
}

func TestOrderRule(t *testing.T) {
	var o orderRule
	for _, c := range []struct {
		name          string
		probes        bool
		group         int
		edge, highest uint64
		want          bool
	}{
		{"unicast, probes, within the edge", true, 1, 100, 90, true},
		{"at the edge", true, 1, 100, 100, true},
		{"reference sender", false, 1, 100, 90, false},
		{"in a group", true, 2, 100, 90, false},
		{"no edge advertised yet", true, 1, 0, 0, false},
		{"released: seqs known beyond the edge", true, 1, 100, 101, false},
	} {
		if got := o.on(c.probes, c.group, c.edge, c.highest); got != c.want {
			t.Errorf("%s: on %v, want %v", c.name, got, c.want)
		}
	}

	// A run NAKed while the edge was 100 awaits its repair. Data up to
	// 100 could have been sent before the sender read the NAK; 101 could
	// not (the sender had not been allowed it): the repair is lost.
	o.reset()
	o.awaiting(100)
	if !o.arrived(95, 120) || o.saw(95) || o.lost(100) {
		t.Fatalf("seq 95 judged the repair lost (seen %d, min %d)", o.seen, o.min)
	}
	if o.arrived(95, 120) || o.arrived(90, 120) {
		t.Fatal("old data is news again")
	}
	if o.arrived(121, 120) {
		t.Fatal("data beyond the advertised edge counted")
	}
	if !o.arrived(101, 120) || !o.saw(101) || !o.lost(100) {
		t.Fatalf("seq 101 did not show the repair lost (seen %d, min %d)", o.seen, o.min)
	}
	if o.lost(101) {
		t.Fatal("a run NAKed at edge 101 judged lost by seq 101")
	}
	// A pass that stopped early leaves runs unjudged: any news may be due.
	o.unsure()
	if !o.arrived(102, 120) || !o.saw(102) {
		t.Fatal("news not due after an unfinished pass")
	}
	o.reset()
	if !o.arrived(103, 120) || o.saw(103) {
		t.Fatal("news due with no run awaiting a repair")
	}
}

func TestPinnedRule(t *testing.T) {
	p := pinnedRule{floor: int64(ms)}
	for _, c := range []struct {
		name                    string
		on                      bool
		expected, highest, edge uint64
		want                    bool
	}{
		{"held at the edge", true, 10, 100, 100, true},
		{"below the edge: new data may be in flight", true, 10, 99, 100, false},
		{"order rule off", false, 10, 100, 100, false},
		{"not synced", true, 0, 100, 100, false},
	} {
		if got := p.pinned(c.on, c.expected, c.highest, c.edge); got != c.want {
			t.Errorf("%s: pinned %v, want %v", c.name, got, c.want)
		}
	}
	for rt, want := range map[uint16]time.Duration{1: ms, 2: 2 * ms, 3: 4 * ms, 31: ms << 30, 40: ms << 30} {
		if got := p.delay(rt); got != int64(want) {
			t.Errorf("delay(%d) = %v, want %v", rt, time.Duration(got), want)
		}
	}
	if d := (pinnedRule{}).delay(1); d != math.MaxInt64 {
		t.Errorf("no floor: delay %d, want never", d)
	}
}

func TestGroupBackoff(t *testing.T) {
	b := groupBackoff{id: 7, pct: DefaultNakBackoff, limit: int64(50 * ms), shared: sharedOne / 2}
	rtt := rttOf(2 * ms)
	if got := (&groupBackoff{id: 7, limit: b.limit, shared: b.shared}).bound(rtt); got != 0 {
		t.Errorf("NakBackoff 0: bound %d, want 0", got)
	}
	if got := b.bound(RTT{}); got != 0 {
		t.Errorf("no RTT estimate: bound %d, want 0", got)
	}
	// shared ½: pct = 25 + (800−25)·¼ = 218 %.
	if got, want := b.bound(rtt), int64(2*ms)*218/100; got != want {
		t.Errorf("bound %d, want %d", got, want)
	}
	if got := b.bound(rttOf(time.Second)); got != b.limit {
		t.Errorf("bound %d past the limit %d", got, b.limit)
	}
	if got := b.delay(5, 0, 1, rtt); got != 0 {
		t.Errorf("alone: back-off %d", got)
	}
	d := b.delay(5, 0, 8, rtt)
	if d < 0 || d > b.bound(rtt) || d != b.delay(5, 0, 8, rtt) {
		t.Errorf("back-off %d outside [0, %d] or not stable", d, b.bound(rtt))
	}

	// Losses all shared push the bound to pct, all independent to
	// pct/32; the EWMA stays in [0, 1].
	for range 200 {
		b.sample(true)
	}
	if b.shared > sharedOne || b.bound(rtt) < int64(2*ms)*790/100 {
		t.Errorf("all shared: shared %d, bound %d", b.shared, b.bound(rtt))
	}
	for range 200 {
		b.sample(false)
	}
	if b.shared < 0 || b.bound(rtt) > int64(2*ms)*26/100 {
		t.Errorf("none shared: shared %d, bound %d", b.shared, b.bound(rtt))
	}
}

func TestBacklogHold(t *testing.T) {
	h := backlogHold{limit: int64(50 * ms)}
	now := int64(0)
	if h.pending() || h.holds(true, now) {
		t.Fatal("held with no backlog")
	}
	h.set(true, now) // at time 0: counts from 1
	if !h.pending() || !h.holds(true, now) || h.holds(false, now) {
		t.Fatal("a group receiver with a backlog is not held, or a unicast one is")
	}
	now += int64(30 * ms)
	h.set(true, now) // still behind: the hold counts from the first report
	if !h.holds(true, now) {
		t.Fatal("released before the limit")
	}
	now = 1 + int64(50*ms)
	if h.holds(true, now) || !h.pending() {
		t.Fatal("held past the limit, or the backlog forgotten")
	}
	h.set(false, now)
	if h.pending() || h.holds(true, now) {
		t.Fatal("held after catching up")
	}
}
