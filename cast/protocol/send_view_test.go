package protocol

import (
	"bytes"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// TestSendViewOfHotRing: a first send goes into out as a view of its
// hot-ring slot (no copy) while out holds fewer messages than the ring
// has slots; with a ring no larger than out, with Coalesce, and for a
// retransmit it is a copy. Either way the bytes are the sealed frame.
func TestSendViewOfHotRing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ring     int
		coalesce bool
		view     bool
	}{
		{"view", 4096, false, true},
		{"ring no larger than the batch", 64, false, false},
		{"coalesce", 4096, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := senderCfg()
			cfg.RingSlots, cfg.Coalesce = tc.ring, tc.coalesce
			s, err := NewSender(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := batch.New(64, 2048)
			p := make([]byte, 128)
			seq, err := s.Send(100, p, 0, out)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := out.Msg(0)
			if out.Owned(0) == tc.view {
				t.Fatalf("view %v, want %v", !out.Owned(0), tc.view)
			}
			h, pl, n, err := wire.DecodeFrame(m)
			if err != nil || n != len(m) || h.Type != 100 || wire.Seq(pl) != seq {
				t.Fatalf("frame %v: type %d seq %d, want 100 %d", err, h.Type, wire.Seq(pl), seq)
			}
			out.Reset()
			s.Handle(nakFrame(seq, 1), mem.AddrB, int64(time.Second), out)
			if out.Len() != 1 || !out.Owned(0) {
				t.Fatalf("retransmit: %d messages, owned %v", out.Len(), out.Len() > 0 && out.Owned(0))
			}
			if r, _ := out.Msg(0); !bytes.Equal(r, m) {
				t.Fatal("retransmit bytes differ from the first send")
			}
		})
	}
}
