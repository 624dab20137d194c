package protocol

import (
	"testing"

	"github.com/walcast/walcast/wire"
)

// TestSkipWithEmptyHole: a Skip marker whose From equals its Seq stands
// for no missing seq. Arriving while earlier records are missing it is
// buffered like a record: the pump NAKs the records before it (and
// terminates), and the marker is applied in its place.
func TestSkipWithEmptyHole(t *testing.T) {
	d := newRecvDirect(t, DefaultReceiverConfig())
	d.feed(0, skipFrame(5, 5, wire.SkipRepair))
	if ns := d.naks(); len(ns) != 1 || ns[0].From != 1 || ns[0].Count != 4 {
		t.Fatalf("NAKs %+v, want one for 1..4", ns)
	}
	at := int64(DefaultNakDebounce) + 1
	d.r.Tick(at, d.out) // the re-NAK pump walks past the marker
	if ns := d.naks(); len(ns) != 1 || ns[0].From != 1 || ns[0].Count != 4 {
		t.Fatalf("re-NAKs %+v, want one for 1..4", ns)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		d.feed(at, frame(seq, 16))
	}
	if got := d.r.ExpectedSeq(); got != 6 || d.r.Stats().Skips != 1 || d.r.LastSkip().Skip.Seq != 5 {
		t.Fatalf("expected %d, skips %d, last skip %+v; want 6, 1, the marker", got, d.r.Stats().Skips, d.r.LastSkip())
	}
}

// TestSkipHole: a waiting marker's hole holds exactly from … to (none
// when empty), a marker for another hole differs, and the jump comes
// when the next expected seq is the hole's first.
func TestSkipHole(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to uint64
		holds    []uint64
		not      []uint64
		jumpAt   uint64
		next     uint64
	}{
		{"a hole", 5, 7, []uint64{5, 6, 7}, []uint64{4, 8}, 5, 8},
		{"an empty hole", 5, 4, nil, []uint64{4, 5}, 5, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h skipHole
			if h.holds(c.from) || h.differs(c.from) {
				t.Fatal("no marker waits, yet the hole holds or differs")
			}
			if _, ok := h.jump(c.from); ok {
				t.Fatal("jumped with no marker waiting")
			}
			h.wait(c.from, c.to, SkipNotice{LostFrom: 1})
			for _, s := range c.holds {
				if !h.holds(s) {
					t.Errorf("holds(%d) false", s)
				}
			}
			for _, s := range c.not {
				if h.holds(s) {
					t.Errorf("holds(%d) true", s)
				}
			}
			if h.differs(c.from) || !h.differs(c.from+1) {
				t.Error("differs wrong")
			}
			if _, ok := h.jump(c.jumpAt - 1); ok {
				t.Fatal("jumped before the hole's first seq was expected")
			}
			next, ok := h.jump(c.jumpAt)
			if !ok || next != c.next || h.holds(c.from) || h.marker.LostFrom != 1 {
				t.Fatalf("jump: %d %v, hole %+v; want %d, cleared, marker kept", next, ok, h, c.next)
			}
			h.wait(c.from, c.to, SkipNotice{})
			h.clear()
			if h.holds(c.from) || h.differs(0) {
				t.Fatal("clear left the hole")
			}
		})
	}
}
