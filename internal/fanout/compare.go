package fanout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/walcast/walcast/internal/latency"
)

// ControlTarget is the fan-out goal: multicast-N's worst-receiver p99 at
// most this many times the unicast-N control's (N unicast senders to the
// same N receivers, same run).
const ControlTarget = 1.2

// Worst is the highest of one percentile (q picks it from a receiver's
// latency summary) over the run's receivers, ns: the worst receiver at
// that percentile.
func (r Result) Worst(q func(latency.Summary) int64) int64 {
	var w int64
	for _, rr := range r.Receivers {
		w = max(w, q(rr.Latency))
	}
	return w
}

// WorstP99 is the highest receiver p99, ns.
func (r Result) WorstP99() int64 { return r.Worst(p99) }

func p50(s latency.Summary) int64  { return s.P50 }
func p99(s latency.Summary) int64  { return s.P99 }
func p999(s latency.Summary) int64 { return s.P999 }

// Ratio is one run's worst-receiver latency over its control's in the
// same run, at p50, p99 and p99.9.
type Ratio struct {
	Run            int // 1-based run of the interleaved runs
	P50, P99, P999 float64
}

// Versus is the comparison of a row with its control over interleaved
// runs: each run's Ratio, and per percentile the median over the runs and
// the spread (min–max).
type Versus struct {
	Runs             []Ratio
	Median, Min, Max Ratio // Run unset
}

// Compare pairs run k of row with run k of control (they ran interleaved,
// so under the same load) and skips a run where either failed (its err is
// not nil) or has no latency. Runs are counted from 1.
func Compare(row, control []Result, rowErrs, controlErrs []error) Versus {
	var v Versus
	for k := range min(len(row), len(control)) {
		if k < len(rowErrs) && rowErrs[k] != nil || k < len(controlErrs) && controlErrs[k] != nil {
			continue
		}
		m, u := row[k], control[k]
		if u.Worst(p50) <= 0 || u.Worst(p99) <= 0 || u.Worst(p999) <= 0 || len(m.Receivers) == 0 {
			continue
		}
		v.Runs = append(v.Runs, Ratio{Run: k + 1,
			P50:  float64(m.Worst(p50)) / float64(u.Worst(p50)),
			P99:  float64(m.Worst(p99)) / float64(u.Worst(p99)),
			P999: float64(m.Worst(p999)) / float64(u.Worst(p999))})
	}
	if len(v.Runs) == 0 {
		return v
	}
	stat := func(f func(Ratio) float64) (med, lo, hi float64) {
		xs := make([]float64, len(v.Runs))
		for i, r := range v.Runs {
			xs[i] = f(r)
		}
		slices.Sort(xs)
		med = xs[len(xs)/2]
		if len(xs)%2 == 0 {
			med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
		}
		return med, xs[0], xs[len(xs)-1]
	}
	v.Median.P50, v.Min.P50, v.Max.P50 = stat(func(r Ratio) float64 { return r.P50 })
	v.Median.P99, v.Min.P99, v.Max.P99 = stat(func(r Ratio) float64 { return r.P99 })
	v.Median.P999, v.Min.P999, v.Max.P999 = stat(func(r Ratio) float64 { return r.P999 })
	return v
}

// Met counts the runs whose p99 ratio is within ControlTarget.
func (v Versus) Met() int {
	n := 0
	for _, r := range v.Runs {
		if r.P99 <= ControlTarget {
			n++
		}
	}
	return n
}

// String is the comparison on one line: the median over the runs with
// the spread per percentile, then each run's ratios (p50/p99/p99.9). "no
// run to compare" when none could be.
func (v Versus) String() string {
	if len(v.Runs) == 0 {
		return "no run to compare"
	}
	f := func(med, lo, hi float64) string {
		if fmt.Sprintf("%.2f", lo) == fmt.Sprintf("%.2f", hi) {
			return fmt.Sprintf("%.2f×", med)
		}
		return fmt.Sprintf("%.2f× (%.2f–%.2f)", med, lo, hi)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "median of %d runs p50 %s, p99 %s, p99.9 %s (", len(v.Runs),
		f(v.Median.P50, v.Min.P50, v.Max.P50), f(v.Median.P99, v.Min.P99, v.Max.P99), f(v.Median.P999, v.Min.P999, v.Max.P999))
	for i, r := range v.Runs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "run %d: %.2f/%.2f/%.2f×", r.Run, r.P50, r.P99, r.P999)
	}
	b.WriteString(")")
	return b.String()
}

// Target says how the runs fare against ControlTarget (p99).
func (v Versus) Target() string {
	verdict := "met"
	if v.Median.P99 > ControlTarget || len(v.Runs) == 0 {
		verdict = "NOT met"
	}
	return fmt.Sprintf("target p99 ≤ %.1f× the unicast control: %s at the median, met in %d of %d runs", ControlTarget, verdict, v.Met(), len(v.Runs))
}
