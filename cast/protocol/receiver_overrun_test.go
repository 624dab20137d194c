package protocol

import "testing"

// TestOverrunDetector: datagrams beyond the window are evidence of an
// overrun only when need of them come with no pause longer than span,
// over at least span, or all two windows ahead from a sender that
// speaks probes; one datagram counts once however many frames it holds.
func TestOverrunDetector(t *testing.T) {
	type see struct {
		now    int64
		ahead  uint64
		handle bool // a new Handle call (resets counted)
	}
	const window = 100
	for _, c := range []struct {
		name   string
		probes bool
		seen   []see
		want   bool // the last see's report
		n      int
	}{
		{name: "need datagrams within span: not yet", seen: []see{{0, 100, true}, {5, 100, true}, {9, 100, true}}, want: false, n: 3},
		{name: "need datagrams over span", seen: []see{{0, 100, true}, {5, 100, true}, {10, 100, true}}, want: true, n: 3},
		{name: "a pause longer than span starts over", seen: []see{{0, 100, true}, {5, 100, true}, {16, 100, true}}, want: false, n: 1},
		{name: "frames of one datagram count once", seen: []see{{0, 100, true}, {10, 100, false}, {10, 100, false}}, want: false, n: 1},
		{name: "far ahead with probes: at once", probes: true, seen: []see{{0, 200, true}, {0, 250, true}, {0, 900, true}}, want: true, n: 3},
		{name: "far ahead without probes: over span", seen: []see{{0, 200, true}, {0, 250, true}, {0, 900, true}}, want: false, n: 3},
		{name: "with probes, one not far", probes: true, seen: []see{{0, 200, true}, {0, 199, true}, {0, 900, true}}, want: false, n: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := overrunDetector{span: 10, need: 3}
			var got bool
			for _, s := range c.seen {
				if s.handle {
					o.counted = false
				}
				got = o.see(s.ahead, window, c.probes, s.now)
			}
			if got != c.want || o.n != c.n || o.far > o.n {
				t.Fatalf("report %v with %d (%d far); want %v with %d", got, o.n, o.far, c.want, c.n)
			}
		})
	}
}
