package protocol

import (
	"fmt"
	"testing"
	"time"

	"github.com/walcast/walcast/datapath/mem"
)

// lossResult is what one sustained-loss run measured.
type lossResult struct {
	records    int
	loss       float64
	retries    int
	delivered  uint64
	retxPerRec float64
	naksPerRec float64
	nearFaults uint64
	maxRetries uint64
	outcome    Outcome
	virtual    time.Duration
	rounds     [33]uint64
}

func (r lossResult) String() string {
	return fmt.Sprintf("records=%d loss=%.0f%%/%.0f%% budget=%d delivered=%d retx/record=%.3f naks/record=%.3f near-faulted=%d max-naks-per-run=%d outcome=%v virtual=%v",
		r.records, r.loss*100, r.loss*100, r.retries, r.delivered, r.retxPerRec, r.naksPerRec, r.nearFaults, r.maxRetries, r.outcome.Kind, r.virtual)
}

// lossRun sends records at one record per period through a link that
// drops each datagram with probability loss in both directions (data,
// retransmits, heartbeats, NAKs), stepping both sides every period, then
// idles until everything is delivered. It fails unless every record was
// delivered exactly once, in order, with no sticky outcome.
// ref runs reference peers (no Status: fixed timers, no flow control);
// otherwise the peers negotiate.
func lossRun(t testing.TB, ref bool, records int, loss float64, retries int, period time.Duration, seed uint64) lossResult {
	return lossRunWith(t, ref, records, loss, retries, period, seed, DefaultNakDebounce, 0)
}

// lossRunWith is lossRun with a NAK debounce and a one-way latency.
func lossRunWith(t testing.TB, ref bool, records int, loss float64, retries int, period time.Duration, seed uint64, debounce, latency time.Duration) lossResult {
	o := defaultOpt()
	o.r.NoStatus = ref
	o.r.MaxNakRetries = retries
	o.r.NakDebounce = debounce
	h := newHarness(t, o)
	h.r.ResetAfterReplay(0) // expect seq 1 even if it is lost
	h.impairData(mem.Impairment{Seed: seed, DropProb: loss, Latency: latency})
	h.impairNaks(mem.Impairment{Seed: seed + 1, DropProb: loss, Latency: latency})
	start := h.now()
	for i := 0; i < records && h.r.Outcome().Kind == Live; i++ {
		h.send(1)
		h.step()
		h.p.Clock.Advance(period)
	}
	for i := 0; i < 200_000 && h.delivered < uint64(records) && h.r.Outcome().Kind == Live; i++ {
		h.step()
		h.p.Clock.Advance(time.Millisecond)
	}
	st, rs := h.s.Stats(), h.r.Stats()
	res := lossResult{
		records: records, loss: loss, retries: retries, delivered: h.delivered,
		retxPerRec: float64(st.RetxHot+st.RetxCold) / float64(records),
		naksPerRec: float64(rs.NaksSent) / float64(records),
		nearFaults: rs.NearFaults, maxRetries: rs.MaxRetries,
		outcome: h.r.Outcome(), virtual: time.Duration(h.now() - start),
		rounds: rs.NakRounds,
	}
	t.Log(res)
	if res.outcome.Kind != Live {
		t.Fatalf("sticky outcome: %v", res.outcome.Err())
	}
	h.expectDelivered(1, uint64(records))
	return res
}

// lossCases are the sustained-loss runs: defaults at 1, 10
// and 30 % loss in both directions, and 50 % with a raised budget.
var lossCases = []struct {
	loss    float64
	retries int
	period  time.Duration
}{
	{0.01, DefaultMaxNakRetries, time.Millisecond},
	{0.10, DefaultMaxNakRetries, time.Millisecond},
	{0.30, DefaultMaxNakRetries, time.Millisecond},
	{0.50, 96, 2 * time.Millisecond},
}

func modeName(ref bool) string {
	if ref {
		return "reference"
	}
	return "negotiated"
}

// TestSustainedLoss runs the loss cases at a scale that suits -race,
// between reference peers and between negotiating peers.
func TestSustainedLoss(t *testing.T) {
	for _, ref := range []bool{true, false} {
		for _, c := range lossCases {
			t.Run(fmt.Sprintf("%s/%.0f%%", modeName(ref), c.loss*100), func(t *testing.T) {
				lossRun(t, ref, 5_000, c.loss, c.retries, c.period, 1)
			})
		}
	}
}

// TestLargeSustainedLoss is the full-scale run: 100 000 records per case.
func TestLargeSustainedLoss(t *testing.T) {
	for _, ref := range []bool{true, false} {
		for _, c := range lossCases {
			t.Run(fmt.Sprintf("%s/%.0f%%", modeName(ref), c.loss*100), func(t *testing.T) {
				t.Parallel()
				lossRun(t, ref, 100_000, c.loss, c.retries, c.period, 1)
			})
		}
	}
}

// TestLargeLossBudgetSweep measures how many NAKs a missing run needs
// under sustained loss (both directions) with an unlimited budget, over
// five seeds per loss rate: the figures behind DefaultMaxNakRetries.
// round[k] is how many NAKs were the k-th of their run; a budget of B
// faults once round[B+1] > 0 and came within one retry of it round[B]
// times.
func TestLargeLossBudgetSweep(t *testing.T) {
	for _, c := range lossCases {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%.0f%%/seed%d", c.loss*100, seed), func(t *testing.T) {
				t.Parallel()
				r := lossRun(t, true, 100_000, c.loss, 60000, c.period, seed*1000)
				t.Logf("SWEEP loss=%.0f%% seed=%d retx/rec=%.3f naks/rec=%.3f max=%d round8=%d round9=%d round24=%d round25=%d",
					c.loss*100, seed, r.retxPerRec, r.naksPerRec, r.maxRetries, r.rounds[8], r.rounds[9], r.rounds[24], r.rounds[25])
			})
		}
	}
}

// TestLargeHighRate: at 50 000 records/s the default window (2048
// records = 41 ms) is shorter than the default 50 ms debounce. Between
// reference peers one lost retransmit overflows it — and that must be
// reported as Reconnect, never as a silent skip; with the debounce
// lowered to 1 ms (10× the 100 µs round trip) the same window repairs 1,
// 10 and 30 % loss both ways. Between negotiating peers the defaults do
// it: the re-NAK delay follows the RTT and flow control holds the
// sender within the window.
func TestLargeHighRate(t *testing.T) {
	for _, loss := range []float64{0.01, 0.10, 0.30} {
		t.Run(fmt.Sprintf("reference/%.0f%% debounce 1ms", loss*100), func(t *testing.T) {
			t.Parallel()
			lossRunWith(t, true, 100_000, loss, DefaultMaxNakRetries, 20*time.Microsecond, 1, time.Millisecond, 50*time.Microsecond)
		})
		t.Run(fmt.Sprintf("negotiated/%.0f%% defaults", loss*100), func(t *testing.T) {
			t.Parallel()
			lossRunWith(t, false, 100_000, loss, DefaultMaxNakRetries, 20*time.Microsecond, 1, DefaultNakDebounce, 50*time.Microsecond)
		})
	}
	t.Run("reference/10% default debounce overflows to Reconnect", func(t *testing.T) {
		o := defaultOpt()
		o.r.NoStatus = true
		h := newHarness(t, o)
		h.r.ResetAfterReplay(0)
		h.impairData(mem.Impairment{Seed: 1, DropProb: 0.1, Latency: 50 * time.Microsecond})
		h.impairNaks(mem.Impairment{Seed: 2, DropProb: 0.1, Latency: 50 * time.Microsecond})
		for i := 0; i < 100_000 && h.r.Outcome().Kind == Live; i++ {
			h.send(1)
			h.step()
			h.p.Clock.Advance(20 * time.Microsecond)
		}
		if o := h.r.Outcome(); o.Kind != Reconnect || o.LastDelivered != h.lastSeq || o.Seq-o.LastDelivered-1 < uint64(DefaultReorderSlots) {
			t.Fatalf("outcome %+v, last delivered %d", o, h.lastSeq)
		}
		if h.orderError != nil {
			t.Fatal(h.orderError)
		}
	})
}
