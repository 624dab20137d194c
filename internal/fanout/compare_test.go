package fanout

import (
	"errors"
	"strings"
	"testing"

	"github.com/walcast/walcast/internal/latency"
)

func result(lat ...latency.Summary) Result {
	var r Result
	for _, l := range lat {
		r.Receivers = append(r.Receivers, ReceiverResult{Latency: l})
	}
	return r
}

// TestCompare: each percentile's worst receiver (not one receiver for
// all three) over the control's in the same run; failed runs skipped; the
// median and spread per percentile; the target counted on p99.
func TestCompare(t *testing.T) {
	s := func(a, b, c int64) latency.Summary { return latency.Summary{P50: a, P99: b, P999: c} }
	multi := []Result{
		result(s(10, 100, 1000), s(20, 90, 900)), // worst p50 20, p99 100, p99.9 1000
		result(s(10, 300, 3000)),                 // a failed run of the control
		result(s(30, 110, 1500)),
		result(s(40, 200, 2000)),
	}
	uni := []Result{
		result(s(10, 100, 1000), s(5, 50, 500)),
		result(s(10, 100, 1000)),
		result(s(20, 100, 1000)),
		result(s(20, 100, 1000)),
	}
	v := Compare(multi, uni, nil, []error{nil, errors.New("down"), nil, nil})
	want := []Ratio{{1, 2, 1, 1}, {3, 1.5, 1.1, 1.5}, {4, 2, 2, 2}}
	if len(v.Runs) != len(want) {
		t.Fatalf("runs %+v, want %+v", v.Runs, want)
	}
	for i, w := range want {
		if v.Runs[i] != w {
			t.Errorf("run %d: %+v, want %+v", i, v.Runs[i], w)
		}
	}
	if v.Median != (Ratio{P50: 2, P99: 1.1, P999: 1.5}) || v.Min != (Ratio{P50: 1.5, P99: 1, P999: 1}) || v.Max != (Ratio{P50: 2, P99: 2, P999: 2}) {
		t.Errorf("median %+v min %+v max %+v", v.Median, v.Min, v.Max)
	}
	if v.Met() != 2 {
		t.Errorf("met in %d runs, want 2 (p99 1.0 and 1.1 ≤ 1.2)", v.Met())
	}
	line := v.String() + " " + v.Target()
	for _, w := range []string{"median of 3 runs", "p99 1.10× (1.00–2.00)", "target p99 ≤ 1.2× the unicast control: met at the median, met in 2 of 3 runs", "run 4: 2.00/2.00/2.00×"} {
		if !strings.Contains(line, w) {
			t.Errorf("%q lacks %q", line, w)
		}
	}
	if got := Compare(nil, nil, nil, nil).String(); got != "no run to compare" {
		t.Errorf("nothing to compare: %q", got)
	}
	// An even count: the median is the mean of the middle two.
	if v := Compare(multi[:1:1], uni[:1], nil, nil); v.Median.P99 != 1 {
		t.Errorf("one run: median %+v", v.Median)
	}
	if v := Compare([]Result{multi[0], multi[3]}, []Result{uni[0], uni[3]}, nil, nil); v.Median.P99 != 1.5 {
		t.Errorf("two runs: median p99 %v, want 1.5", v.Median.P99)
	}
}
