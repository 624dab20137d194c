package protocol

import (
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
)

// TestSenderComponentsZeroAllocs covers the retransmitter's paths that
// TestZeroAllocs does not reach: a NAK range deferred for batch room and
// drained by Tick, and a cold read queued, handed out and served.
func TestSenderComponentsZeroAllocs(t *testing.T) {
	check := func(name string, f func()) {
		t.Helper()
		f() // warm up
		if n := testing.AllocsPerRun(500, f); n != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, n)
		}
	}
	payload := make([]byte, 128)

	cfg := senderCfg()
	cfg.RingSlots = 64
	s, err := NewSender(cfg, &preLog{next: 1, buf: make([]byte, 4096)})
	if err != nil {
		t.Fatal(err)
	}
	big := batch.New(64, 2048)
	for k := 0; k < 200; k++ {
		big.Reset()
		if _, err := s.Send(100, payload, 0, big); err != nil {
			t.Fatal(err)
		}
	}
	small := batch.New(2, 2048)
	hot := nakFrame(s.NextSeq()-8, 8)
	now := int64(0)
	check("NAK deferred for batch room, drained by Tick", func() {
		now += int64(ms)
		small.Reset()
		s.Handle(hot, mem.AddrB, now, small)
		for s.RetxPending() {
			small.Reset()
			s.Tick(now, small)
		}
	})

	cold := nakFrame(1, 1)
	old := frame(1, 128)
	var reqs [4]ColdRequest
	check("cold NAK, ColdRequests, ColdDone", func() {
		now += int64(ms)
		big.Reset()
		s.Handle(cold, mem.AddrB, now, big)
		if n := s.ColdRequests(reqs[:]); n != 1 {
			t.Fatalf("%d cold requests, want 1", n)
		}
		if rest := s.ColdDone(reqs[0], old, now, big); len(rest) != 0 || big.Len() != 1 {
			t.Fatalf("cold retransmit: rest %d, %d datagrams", len(rest), big.Len())
		}
	})
}
