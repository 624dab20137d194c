package pathbench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/walcast/walcast/internal/benchkit"
)

// TestReportNamesCounterKinds: hardware (PMU) counters that counted get
// their own table, per path and thread; where the host hides its PMU the
// report says they are n/a and why, and never passes software figures off
// as hardware ones.
func TestReportNamesCounterKinds(t *testing.T) {
	row := func(spec string, perf ...benchkit.PerfCount) Row {
		x := Row{Row: benchkit.Row{Workload: "rtt", Name: spec, Path: "udp"}, Spec: spec, Size: 144}
		x.A.Perf, x.B.Perf = perf, perf
		return x
	}
	sw := benchkit.PerfCount{Name: "task-clock", OK: true, PerOp: 4000}
	noPMU := benchkit.PerfCount{Name: "cycles", Why: "ENOENT: event not exposed (VM without PMU?)"}
	for _, tc := range []struct {
		name      string
		rows      []Row
		want, not []string
	}{
		{"no PMU", []Row{row("udp", noPMU, sw)},
			[]string{"hardware events (PMU): n/a on this host (cycles: ENOENT: event not exposed (VM without PMU?))"},
			[]string{"== hardware counters"}},
		{"PMU", []Row{row("udp", benchkit.PerfCount{Name: "cycles", OK: true, PerOp: 12345}, sw),
			row("xdp-native", benchkit.PerfCount{Name: "cycles", OK: true, PerOp: 6789}, benchkit.PerfCount{Name: "instructions", OK: true, PerOp: 999}, sw)},
			[]string{"== hardware counters (PMU) per operation, A / B", "12345 / 12345", "6789 / 6789", "n/a / n/a", "999 / 999", "in their own table above"},
			[]string{"n/a on this host", "4000 / 4000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Summary: tc.rows}
			var b bytes.Buffer
			r.Text(&b, false)
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("unexpected %q in:\n%s", w, out)
				}
			}
		})
	}
}
