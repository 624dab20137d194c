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
