package protocol

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// replay plays the part of TCP catch-up: it delivers every record after
// the last delivered one straight from the log, then resets the receiver
// to the new tip (spec §7.6 pattern A).
func (h *harness) replay() {
	buf := make([]byte, 70000)
	for seq := h.lastSeq + 1; seq < h.s.NextSeq(); seq++ {
		_, n, err := h.reader.ReadRange(seq, 1, buf)
		if err != nil {
			h.t.Fatal(err)
		}
		hd, p, _, err := wire.DecodeFrame(buf[:n])
		if err != nil {
			h.t.Fatal(err)
		}
		h.deliver(hd, p)
	}
	h.r.ResetAfterReplay(h.lastSeq)
}

func randImpairment(rng *rand.Rand) mem.Impairment {
	imp := mem.Impairment{Seed: rng.Uint64(), Latency: time.Duration(rng.IntN(3)) * time.Millisecond}
	pick := func(max float64) float64 {
		if rng.IntN(2) == 0 {
			return 0
		}
		return rng.Float64() * max
	}
	imp.DropProb = pick(0.5)
	imp.DupProb = pick(0.2)
	imp.ReorderProb = pick(0.3)
	imp.ReorderBy = 1 + rng.IntN(8)
	imp.CorruptProb = pick(0.1)
	imp.CorruptFrom = 4 // the CRC covers the payload only: a flipped record type is undetectable here (UDP's checksum catches it)
	if rng.IntN(4) == 0 {
		from := int64(rng.IntN(2000)) * int64(ms)
		imp.Blackouts = []mem.Window{{From: 1_000_000_000 + from, To: 1_000_000_000 + from + int64(rng.IntN(1500))*int64(ms)}}
	}
	if rng.IntN(4) == 0 {
		for i := rng.IntN(20); i > 0; i-- {
			imp.Drop = append(imp.Drop, rng.IntN(500))
		}
	}
	return imp
}

// propertyRun runs one random script and checks the invariants: delivery
// is always a gap-free prefix in seq order with no duplicates; after an
// idle period the stream is either complete or in a sticky outcome, and
// with replay-and-reset every record is delivered exactly once.
func propertyRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	o := defaultOpt()
	o.r.ReorderSlots = 1 << (4 + rng.IntN(8))
	o.r.MaxNakRetries = zeroOff(rng.IntN(30))
	o.r.NakDebounce = zeroOff(time.Duration(rng.IntN(60)) * ms)
	o.s.Coalesce = rng.IntN(3) == 0
	o.s.RingSlots = 1 << (4 + rng.IntN(9))
	o.s.RetxDedupWindow = zeroOff(time.Duration(rng.IntN(3)) * ms)
	h := newHarness(t, o)
	h.r.ResetAfterReplay(0)
	if rng.IntN(2) == 0 { // a consumer behind a bounded queue, sometimes slow
		h.queueCap = 32 << rng.IntN(6)
		h.autoConsume = 1 + rng.IntN(8)
	}
	data := randImpairment(rng)
	if o.s.Coalesce {
		data.CorruptProb = 0 // a flip could land on the (uncovered) type of a later frame
	}
	h.impairData(data)
	h.impairNaks(randImpairment(rng))
	records := 1 + rng.IntN(1500)
	sent, replays := 0, 0
	for sent < records {
		k := min(1+rng.IntN(20), records-sent)
		h.send(k)
		sent += k
		h.run(time.Duration(rng.IntN(5))*ms, ms)
		if h.orderError != nil {
			t.Fatalf("seed %d: %v", seed, h.orderError)
		}
		if h.r.Outcome().Kind != Live {
			if k := h.r.Outcome().Kind; k != Faulted && k != Reconnect {
				t.Fatalf("seed %d: outcome %v", seed, h.r.Outcome())
			}
			h.replay()
			replays++
		}
	}
	// Heal the links and idle: the tail must arrive by NAK or replay.
	h.impairData(mem.Impairment{})
	h.impairNaks(mem.Impairment{})
	for i := 0; i < 5 && h.delivered < uint64(records); i++ {
		h.run(2*time.Second, ms)
		if h.r.Outcome().Kind != Live {
			h.replay()
			replays++
		}
	}
	if h.orderError != nil {
		t.Fatalf("seed %d: %v", seed, h.orderError)
	}
	st := h.r.Stats()
	t.Logf("records %d, %d replays (faults %d, reconnects %d), %d NAKs, %d retransmits, backpressure %d, consumer queue %d overflows %d",
		records, replays, st.Faults, st.Reconnects, st.NaksSent, h.s.Stats().RetxHot+h.s.Stats().RetxCold, h.backpressured, h.queueCap, h.overflows)
	if h.delivered != uint64(records) || h.lastSeq != uint64(records) {
		t.Fatalf("seed %d: delivered %d (last %d) of %d, outcome %+v, %d replays", seed, h.delivered, h.lastSeq, records, h.r.Outcome(), replays)
	}
}

// TestPropertyRandomScripts runs random impairment scripts and configs.
func TestPropertyRandomScripts(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 30
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { propertyRun(t, seed) })
	}
}

// TestLargePropertyRandomScripts runs many more scripts outside -race.
func TestLargePropertyRandomScripts(t *testing.T) {
	for seed := uint64(1000); seed < 3000; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { propertyRun(t, seed) })
	}
}

// zeroOff maps a drawn 0 to -1: in the configs zero means the default and
// a negative value the setting zero used to be.
func zeroOff[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
