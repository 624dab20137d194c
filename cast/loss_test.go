package cast

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
func lossRun(t testing.TB, records int, loss float64, retries int, period time.Duration, seed uint64) lossResult {
	o := defaultOpt()
	o.r.MaxNakRetries = retries
	h := newHarness(t, o)
	h.r.ResetAfterReplay(0) // expect seq 1 even if it is lost
	h.impairData(mem.Impairment{Seed: seed, DropProb: loss})
	h.impairNaks(mem.Impairment{Seed: seed + 1, DropProb: loss})
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
	}
	t.Log(res)
	if res.outcome.Kind != Live {
		t.Fatalf("sticky outcome: %v", res.outcome.Err())
	}
	h.expectDelivered(1, uint64(records))
	return res
}

// lossCases are the sustained-loss runs of issue 3: defaults at 1, 10
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

// TestSustainedLoss runs the loss cases at a scale that suits -race.
func TestSustainedLoss(t *testing.T) {
	for _, c := range lossCases {
		t.Run(fmt.Sprintf("%.0f%%", c.loss*100), func(t *testing.T) {
			lossRun(t, 5_000, c.loss, c.retries, c.period, 1)
		})
	}
}

// TestLargeSustainedLoss is the full-scale run: 100 000 records per case.
func TestLargeSustainedLoss(t *testing.T) {
	for _, c := range lossCases {
		t.Run(fmt.Sprintf("%.0f%%", c.loss*100), func(t *testing.T) {
			t.Parallel()
			lossRun(t, 100_000, c.loss, c.retries, c.period, 1)
		})
	}
}
