package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cast bench latency measures its five rows and exits 0; the lossy row
// lost datagrams and repaired them, the lost-tail and single-gap rows
// lost exactly one first transmission per burst, and the targets are
// judged (not asserted: timings are the bench's business, not a test's).
func TestCLIBenchLatency(t *testing.T) {
	b := runCast(t, "bench", "latency", "-n", "2000", "-warmup", "200", "-rate", "20000", "-loss", "5", "-bursts", "20",
		"-floor-n", "500", "-runs", "1", "-pin", "none", "-stall", "60s")
	b.expect(0, "stdout", `^load at the end `)
	out := b.Stdout.String()
	field := func(mode, name string) int {
		m := regexp.MustCompile(`(?m)^  1 casting-mmsg +mmsg +` + regexp.QuoteMeta(mode) + ` .*\b` + name + `=(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s in the %q row:\n%s", name, mode, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if !strings.Contains(out, "  1 floor-loop ") {
		t.Fatalf("no floor row:\n%s", out)
	}
	if d := field("loss 0%", "dropped"); d != 0 || field("loss 0%", "delivered") != 2200 {
		t.Fatalf("lossless row dropped %d or delivered short:\n%s", d, out)
	}
	if d := field("loss 5%", "dropped"); d == 0 || field("loss 5%", "retx") == 0 || field("loss 5%", "delivered") != 2200 {
		t.Fatalf("lossy row: no loss applied or not repaired:\n%s", out)
	}
	for _, mode := range []string{"lost-tail", "single-gap"} {
		if field(mode, "dropped") != 20 || field(mode, "delivered") != 320 {
			t.Fatalf("%s row: want 20 dropped and 320 delivered:\n%s", mode, out)
		}
	}
	if !regexp.MustCompile(`(?m)^lost tail p99 ≤ 1 ms +(met|NOT met) +in \d of 1 runs`).MatchString(out) {
		t.Fatalf("no verdict on the lost-tail target:\n%s", out)
	}
}
