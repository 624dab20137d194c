package protocol

import (
	"math"
	"testing"
	"time"
)

// TestInitialWindowUnit: before any Status, seqs past the window fixed by
// the first check wait until InitialWait, unless a NAK with no Status
// after it for statusGrace shows a receiver that never sends one; its
// last record is the probe; it is off without flow control.
func TestInitialWindowUnit(t *testing.T) {
	mk := func(window int, noFC, hasLog bool, wait time.Duration) (*initialWindow, *SenderStats) {
		cfg := senderCfg()
		cfg.InitialWindow, cfg.InitialWait, cfg.RingSlots, cfg.NoFlowControl = window, wait, 8, noFC
		st := new(SenderStats)
		w := newInitialWindow(&cfg, hasLog, st)
		return &w, st
	}
	for _, c := range []struct {
		name   string
		window int
		noFC   bool
		hasLog bool
		size   uint64
	}{
		{"with a log", 16, false, true, 16},
		{"WAL-less: at most the hot ring", 16, false, false, 8},
		{"off", -1, false, true, 0},
		{"off without flow control", 16, true, true, 0},
	} {
		if w, _ := mk(c.window, c.noFC, c.hasLog, time.Second); w.size != c.size {
			t.Errorf("%s: size %d, want %d", c.name, w.size, c.size)
		}
	}
	w, st := mk(4, false, true, time.Hour)
	const big = math.MaxInt64
	for _, s := range []struct {
		name     string
		now      int64
		nak      bool
		next     uint64 // seq checked (0: none)
		holds    bool
		probe    uint64 // seq that would be the probe (0: none)
		deadline int64
	}{
		{name: "the first check fixes edge 5 and the wait", now: 2, next: 2, probe: 5, deadline: big},
		{name: "past the edge waits", now: 10, next: 6, holds: true, probe: 5, deadline: big},
		{name: "a NAK starts the grace", now: 100, nak: true, next: 6, holds: true, deadline: 100 + statusGrace},
		{name: "within the grace still held", now: 99 + statusGrace, next: 6, holds: true, deadline: 100 + statusGrace},
		{name: "no Status in the grace: released", now: 100 + statusGrace, next: 6, deadline: big},
	} {
		if s.nak {
			w.nak(s.now)
		}
		if s.next != 0 {
			if got := w.holds(s.next, s.now); got != s.holds {
				t.Fatalf("%s: holds(%d) = %v", s.name, s.next, got)
			}
		}
		for seq := uint64(1); seq <= 6; seq++ {
			if w.probes(seq, s.now) != (seq == s.probe) {
				t.Fatalf("%s: probes(%d) = %v, want the probe %d", s.name, seq, w.probes(seq, s.now), s.probe)
			}
		}
		if d := w.deadline(big, false); d != s.deadline {
			t.Fatalf("%s: deadline %d, want %d", s.name, d, s.deadline)
		}
	}
	if st.InitialReleased != 1 || !w.released {
		t.Fatalf("released %v, counted %d", w.released, st.InitialReleased)
	}
	// Held until InitialWait when nothing is heard.
	w, _ = mk(4, false, true, 1000)
	w.holds(1, 1)
	if !w.holds(5, 1000) || w.holds(5, 1001) {
		t.Fatal("the initial window did not hold exactly until InitialWait")
	}
}
