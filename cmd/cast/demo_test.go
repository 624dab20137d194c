package main

import (
	"testing"

	"github.com/walcast/walcast/affinity"
)

// demoLayout: auto gives each loop a spinning thread only when a CPU is
// left over for the rest; on two CPUs both loops share one spinning
// thread; on one nothing spins. An explicit -idle is taken as asked.
func TestDemoLayout(t *testing.T) {
	spin, park := affinity.Spin, affinity.Park
	for _, c := range []struct {
		idle     string
		ncpu     int
		shared   bool
		snd, rcv affinity.Strategy
	}{
		{"auto", 1, false, park, park},
		{"auto", 2, true, spin, spin},
		{"auto", 3, false, spin, spin},
		{"auto", 64, false, spin, spin},
		{"spin", 1, false, spin, spin},
		{"park", 8, false, park, park},
		{"mixed", 2, false, spin, park},
		{"shared", 8, true, spin, spin},
	} {
		l := demoLayout(c.idle, c.ncpu)
		if l.shared != c.shared || l.snd != c.snd || l.rcv != c.rcv || l.why == "" {
			t.Errorf("-idle %s on %d CPUs: %+v, want shared=%v %v/%v", c.idle, c.ncpu, l, c.shared, c.snd, c.rcv)
		}
	}
}
