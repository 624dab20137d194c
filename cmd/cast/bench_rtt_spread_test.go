package main

import (
	"math"
	"strings"
	"testing"

	"github.com/walcast/walcast/internal/benchkit"
)

// TestPrintSpreadMedian: the spread table gives each row's median over
// the runs with the range, the median of an even count as the mean of
// the middle two, a lone figure alone, and "-" where no run has one.
func TestPrintSpreadMedian(t *testing.T) {
	var rows []benchkit.Row
	for i, x := range []float64{0.9, 0.5, 0.7} {
		rows = append(rows, benchkit.Row{Name: "casting-mmsg", Bytes: 144, Run: i + 1, RecPerS: 1e6 * x, RatioTput: x})
	}
	for i, x := range []float64{0.4, 0.8, 0.6, 0.2} {
		rows = append(rows, benchkit.Row{Name: "raw-gso-gro", Bytes: 144, Run: i + 1, RecPerS: 1e6, RatioTput: x})
	}
	rows = append(rows, benchkit.Row{Name: "floor-gso-gro", Bytes: 144, Run: 1, RecPerS: 2e6},
		benchkit.Row{Name: "nan", Bytes: 144, Run: 1, RecPerS: 1, RatioTput: math.NaN()})
	var sb strings.Builder
	printSpread(&sb, rows)
	out := sb.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"median (min–max)",
		"700000 (500000–900000)", "0.70 (0.50–0.90)", // odd count: the middle one
		"0.50 (0.20–0.80)", // even count: the mean of the middle two
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "floor-gso-gro" && (f[3] != "2000000" || f[4] != "-") {
			t.Errorf("floor row: %q, want its one figure and no ratio", line)
		}
		if len(f) > 0 && f[0] == "nan" && f[len(f)-1] != "-" {
			t.Errorf("NaN ratio row: %q, want -", line)
		}
	}
}
