package protocol

import (
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
)

// TestColdBudget: the token bucket starts full, pays one record per
// 1e9 tokens, earns rate records a second and never holds more than
// full.
func TestColdBudget(t *testing.T) {
	b := coldBudget{tokens: 4e9, full: 4e9, rate: 1000, at: never}
	for _, c := range []struct {
		name  string
		now   int64
		spend uint64
		want  uint64 // records allowed after the refill (before spending)
	}{
		{"first refill only starts the clock", 5, 4, 4},
		{"no time, nothing earned", 5, 0, 0},
		{"one ms earns one record", 1_000_005, 0, 1},
		{"half a ms more: still one", 1_500_005, 1, 1},
		{"time going back earns nothing", 1_000_000, 0, 0},
		{"ten seconds fill it, no more", 10_001_500_005, 0, 4},
	} {
		b.refill(c.now)
		if got := b.records(); got != c.want {
			t.Fatalf("%s: %d records, want %d", c.name, got, c.want)
		}
		b.tokens -= int64(c.spend) * 1e9
		if b.tokens < 0 || b.tokens > b.full {
			t.Fatalf("%s: tokens %d outside 0..%d", c.name, b.tokens, b.full)
		}
	}
}

func newTestColdQueue(burst int64, stats *SenderStats) coldQueue {
	cfg := senderCfg()
	cfg.MaxColdRecords, cfg.MaxColdInFlight, cfg.MaxColdQueued = 4, 2, 2
	cfg.ColdBurst, cfg.ColdRate = burst, 1000
	return newColdQueue(cfg, true, stats)
}

// TestColdQueue: requests are split at MaxColdRecords and never
// overlap; seqs queued, running or served within the dedup window are
// not read again; at most MaxColdInFlight run, lowest seqs first; the
// budget and the slots bound what is queued.
func TestColdQueue(t *testing.T) {
	var st SenderStats
	q := newTestColdQueue(100, &st)
	const dedup = 100
	q.queue(10, 10, 0, dedup)
	q.queue(12, 4, 0, dedup)
	if st.ColdQueued != 3 || st.ColdDedup != 4 {
		t.Fatalf("queued %d, dedup %d; want 3, 4", st.ColdQueued, st.ColdDedup)
	}
	reqs := make([]ColdRequest, 8)
	if n := q.take(reqs); n != 2 || reqs[0] != (ColdRequest{10, 4}) || reqs[1] != (ColdRequest{14, 4}) || q.pending() {
		t.Fatalf("took %v (pending %v), want 10+4, 14+4 with two running", reqs[:n], q.pending())
	}
	out := batch.New(8, 2048)
	em := emitter{dest: mem.AddrB, maxFrame: 1472}
	var frames []byte
	for _, s := range []uint64{9, 10, 11, 12} { // 9 is outside the request, 13 missing
		frames = append(frames, frame(s, 8)...)
	}
	if rest := q.done(ColdRequest{10, 4}, frames, 50, &em, out); rest != nil || layout(t, out) != "[10] [11] [12]" {
		t.Fatalf("done sent %s, rest %d bytes", layout(t, out), len(rest))
	}
	if st.RetxCold != 3 || st.ColdMissing != 1 || !q.pending() {
		t.Fatalf("cold %d missing %d pending %v", st.RetxCold, st.ColdMissing, q.pending())
	}
	q.queue(10, 2, 100, dedup) // served at 50: within the window
	q.queue(10, 2, 150, dedup) // past it
	if st.ColdDedup != 6 || st.ColdQueued != 4 {
		t.Fatalf("dedup %d queued %d; want 6, 4", st.ColdDedup, st.ColdQueued)
	}
	q.failed(ColdRequest{14, 4})
	q.failed(ColdRequest{14, 4}) // finished already: nothing
	if st.ColdErrors != 1 || q.running != 0 {
		t.Fatalf("errors %d running %d", st.ColdErrors, q.running)
	}
	q.queue(30, 8, 150, dedup) // two slots free of four: 30+4 and 34+4 take them
	q.queue(40, 1, 150, dedup) // none left
	if st.ColdRejected != 1 {
		t.Fatalf("rejected %d, want 1", st.ColdRejected)
	}

	var sb SenderStats
	b := newTestColdQueue(2, &sb)
	b.queue(100, 5, 0, dedup)
	if sb.ColdQueued != 1 || sb.ColdOverBudget != 3 || b.take(reqs) != 1 || reqs[0] != (ColdRequest{100, 2}) {
		t.Fatalf("over budget: queued %d, over %d, request %v", sb.ColdQueued, sb.ColdOverBudget, reqs[0])
	}
	// A full batch hands the frames back; the request stays running.
	full := batch.New(1, 2048)
	full.Append(nakFrame(1, 1), mem.AddrB)
	two := append(frame(100, 8), frame(101, 8)...)
	if rest := b.done(ColdRequest{100, 2}, two, 1, &em, full); len(rest) != len(two) || b.running != 1 {
		t.Fatalf("full batch: rest %d bytes, running %d", len(rest), b.running)
	}
}
