package main

import (
	"regexp"
	"strings"
	"testing"
)

// cast bench cost measures every row at each size and prints the
// summary with the layers' deltas (the figures are the bench's business,
// not a test's: only their presence and form are checked).
func TestCLIBenchCost(t *testing.T) {
	b := runCast(t, "bench", "cost", "-d", "50ms", "-runs", "1", "-sizes", "144", "-pin", "none", "-dir", t.TempDir())
	b.expect(0, "stdout", `^load at the end `)
	out := b.Stdout.String()
	for _, row := range []string{"floor-gso-gro", "datapath", "+framing/crc", "casting-noflow", "casting", "casting+wal", "wal-alone"} {
		if !regexp.MustCompile(`(?m)^  1   144  ` + regexp.QuoteMeta(row) + ` +\d+\.\d +\d+% .*send: \d+\.\d ms cpu`).MatchString(out) {
			t.Fatalf("no measured %s row:\n%s", row, out)
		}
		if !regexp.MustCompile(`(?m)^144 +` + regexp.QuoteMeta(row) + ` +1 +\d+\.\d `).MatchString(out) {
			t.Fatalf("no %s line in the summary:\n%s", row, out)
		}
	}
	if !strings.Contains(out, "Δ send") || strings.Contains(out, "FAILED") {
		t.Fatalf("summary without deltas, or a failed row:\n%s", out)
	}
}

// TestPickTputRows: -rows keeps the named throughput rows in the
// command's order and refuses a name it does not have, listing them.
func TestPickTputRows(t *testing.T) {
	got, err := pickTputRows("casting-mmsg, floor+frame", tputRunners)
	if err != nil || len(got) != 2 || got[0].name != "floor+frame" || got[1].name != "casting-mmsg" {
		t.Fatalf("pick: %v %v", got, err)
	}
	if _, err := pickTputRows("casting-mmsg,nope", tputRunners); err == nil || !strings.Contains(err.Error(), `no row "nope"`) || !strings.Contains(err.Error(), "raw-gso-gro") {
		t.Fatalf("unknown row: %v", err)
	}
}
