package latency

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	s := NewSamples(1000)
	for i := 1000; i >= 1; i-- { // reverse order: Summarize must sort
		s.Record(int64(i))
	}
	s.Record(5000) // full: dropped, not recorded
	if s.Dropped() != 1 || s.Len() != 1000 {
		t.Fatalf("dropped %d len %d", s.Dropped(), s.Len())
	}
	got := s.Summarize()
	if got.Min != 1 || got.P50 != 500 || got.P90 != 900 || got.P99 != 990 || got.P999 != 999 || got.Max != 1000 {
		t.Fatalf("%+v", got)
	}
	if math.Abs(got.Mean-500.5) > 1e-9 {
		t.Fatalf("mean %v", got.Mean)
	}
	if s.Values()[0] != 1000 {
		t.Fatal("Summarize modified the recorded order")
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("empty summary")
	}
	if !math.IsNaN(Ratio(1, 0)) || Ratio(3, 2) != 1.5 {
		t.Fatal("ratio")
	}
}

func TestRecordAllocs(t *testing.T) {
	s := NewSamples(10)
	if n := testing.AllocsPerRun(100, func() { s.Record(1) }); n != 0 {
		t.Fatalf("Record allocates %v", n)
	}
}
