package protocol

import (
	"slices"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// specReceiver is the reference receiver as the spec describes it (§5.3
// per-datagram pipeline, §5.4 NAK pump, defaults: 2048-slot ring, 256-byte
// slots, 50 ms debounce, 8 retries), written from the spec and sharing no
// code with Receiver: it is what a walcast sender's bytes meet at a
// receiver that speaks none of walcast's extensions.
type specReceiver struct {
	expected, highest uint64
	ring              [2048]uint64 // seq held per slot (0 = empty)
	typ               [2048]uint16
	nakAt             [2048]int64 // +1, so 0 is "never"
	retries           int
	faulted           bool
	gapStart, gapEnd  uint64
	reconnect         bool

	delivered []specRecord
	naks      [][]byte
}

type specRecord struct {
	seq uint64
	typ uint16
}

func (r *specReceiver) handle(d []byte, now int64) {
	h, p, _, err := wire.DecodeFrame(d) // §5.3 steps 1–4: short, version, length, CRC; bytes beyond 16+len ignored
	if err != nil || r.faulted || r.reconnect {
		return
	}
	switch h.Type {
	case wire.TypeHeartbeat: // step 5
		if len(p) >= 64 {
			r.highest = max(r.highest, wire.Seq(p))
			r.pump(now)
		}
		return
	case wire.TypeNak: // step 6
		return
	}
	// Step 7: any other type is data.
	if len(p) < 8 || wire.Seq(p) == 0 {
		return
	}
	seq := wire.Seq(p)
	if r.expected == 0 { // step 8: the first data record defines the start
		r.expected = seq
	}
	if seq < r.expected && r.expected-seq > 100 { // step 9: sender-reset heuristic
		r.ring = [2048]uint64{}
		r.expected = seq
	}
	if seq < r.expected { // step 10: duplicate
		return
	}
	r.highest = max(r.highest, seq) // step 11
	if seq == r.expected {          // step 12
		r.deliver(seq, h.Type)
	} else { // step 13
		i := seq & 2047
		if len(d) > 256 {
			return
		}
		if r.ring[i] != 0 && r.ring[i] != seq {
			r.reconnect = true
			return
		}
		r.ring[i], r.typ[i] = seq, h.Type
		r.pump(now)
	}
	for i := r.expected & 2047; r.ring[i] == r.expected; i = r.expected & 2047 {
		r.ring[i] = 0
		r.deliver(r.expected, r.typ[i])
	}
}

func (r *specReceiver) deliver(seq uint64, typ uint16) {
	r.delivered = append(r.delivered, specRecord{seq, typ})
	r.expected, r.retries = seq+1, 0
	r.nakAt[seq&2047] = 0
}

// pump is §5.4: NAK the oldest missing run, debounced, within the retry
// budget.
func (r *specReceiver) pump(now int64) {
	if r.faulted || r.reconnect || r.expected == 0 || r.expected > r.highest {
		return
	}
	from := r.expected
	upper := min(r.highest, from+2048)
	stop := from
	for stop <= upper && r.ring[stop&2047] != stop {
		stop++
	}
	count := stop - from
	if count == 0 {
		return
	}
	if at := r.nakAt[from&2047]; at != 0 && now-(at-1) < 50e6 {
		return
	}
	r.naks = append(r.naks, nakFrame(from, count))
	r.nakAt[from&2047] = now + 1
	r.retries++
	if r.retries > 8 {
		r.faulted, r.gapStart, r.gapEnd = true, from, from+count-1
	}
}

// TestReferenceReceiverAfterACrash: what a reference receiver (one that
// speaks none of walcast's extensions, built from the spec) does with a
// restarted walcast sender's Skip marker. The spec treats every type but
// 0x11 and 0x12 as data (§2, §5.3 step 7), so 0x17 is a data record to
// it: it delivers the marker to its application, as a record of type
// 0x17 and seq S, only when the marker is in order — a receiver whose
// first datagram is the marker (it syncs there, step 8). Any receiver
// that heard the stream before the crash has a hole in front of the
// marker: it buffers the marker, NAKs the hole, the sender answers with
// the marker again (the hole has no records), and after 8 NAKs the
// receiver is Faulted at the hole; it never delivers the marker and is
// never told which of its delivered seqs the log lost. Its application's
// TCP catch-up (no ReplayExt: the server sends no marker) then skips the
// hole. This is the row of docs/protocol.md's interop table.
func TestReferenceReceiverAfterACrash(t *testing.T) {
	for _, tc := range []struct {
		name      string
		delivered uint64 // seqs 1…delivered heard before the crash
		from, s   uint64 // the marker: seqs from … s−1 have no record
	}{
		{"delivered seqs that were not durable", 10, 6, 1000},
		{"delivered everything durable, hole wider than the ring", 5, 6, 70001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &specReceiver{}
			for seq := uint64(1); seq <= tc.delivered; seq++ {
				r.handle(frame(seq, 64), 0)
			}
			s, out := newTestSender(t, senderCfg(), newSkipLog(tc.from, tc.s))
			if _, err := s.Send(100, make([]byte, 64), 0, out); err != nil {
				t.Fatal(err)
			}
			var answered []uint64
			for now := int64(0); !r.faulted && !r.reconnect && now < 100*60e6; now += 60e6 {
				s.Tick(now, out)
				for i := 0; i < out.Len(); i++ {
					b, _ := out.Msg(i)
					r.handle(b, now)
				}
				out.Reset()
				for _, nk := range r.naks {
					s.Handle(nk, mem.AddrB, now, out)
					answered = append(answered, seqsIn(t, out)...)
				}
				r.naks = nil
			}
			want := make([]specRecord, 0, tc.delivered)
			for seq := uint64(1); seq <= tc.delivered; seq++ {
				want = append(want, specRecord{seq, 100})
			}
			if !slices.Equal(r.delivered, want) {
				t.Fatalf("delivered %v, want 1…%d only (the marker is never in order)", r.delivered, tc.delivered)
			}
			if !r.faulted || r.gapStart != tc.delivered+1 || r.gapEnd < r.gapStart {
				t.Fatalf("faulted %v gap %d…%d reconnect %v, want Faulted at %d", r.faulted, r.gapStart, r.gapEnd, r.reconnect, tc.delivered+1)
			}
			if len(answered) == 0 || slices.ContainsFunc(answered, func(seq uint64) bool { return seq != tc.s }) {
				t.Fatalf("NAKs over the hole answered with %v, want only the marker %d", answered, tc.s)
			}
		})
	}
	t.Run("a receiver that starts at the marker delivers it as data", func(t *testing.T) {
		r := &specReceiver{}
		s, out := newTestSender(t, senderCfg(), newSkipLog(6, 1000))
		if _, err := s.Send(100, make([]byte, 64), 0, out); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < out.Len(); i++ {
			b, _ := out.Msg(i)
			r.handle(b, 0)
		}
		if want := []specRecord{{1000, wire.TypeSkip}, {1001, 100}}; !slices.Equal(r.delivered, want) {
			t.Fatalf("delivered %v, want %v", r.delivered, want)
		}
	})
}

// seqsIn returns the seqs of the data frames in out and resets it.
func seqsIn(t *testing.T, out *batch.Vec) []uint64 {
	t.Helper()
	if out.Len() == 0 {
		return nil
	}
	return retransmitted(t, out)
}
