package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cast bench latency measures its six rows and exits 0; the lossy row
// lost datagrams and repaired them, the lost-tail and single-gap rows
// lost exactly one first transmission per burst and the burst-lossless
// baseline none, the single gap's repair cost (single-gap − burst-lossless
// over the floor) is reported in its row, the spread and its target with
// the raw ratio beside it, and the targets are judged (not asserted:
// timings are the bench's business, not a test's).
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
	if field("burst-lossless", "dropped") != 0 || field("burst-lossless", "naks") != 0 || field("burst-lossless", "delivered") != 320 {
		t.Fatalf("burst-lossless row: want nothing dropped or NAKed and 320 delivered:\n%s", out)
	}
	num := `-?\d+\.\d+`
	for what, re := range map[string]string{
		"the single-gap row's repair cost": `(?m)^  1 casting-mmsg +mmsg +single-gap .*  repair \(− burst-lossless\): p50 [+-]\d+\.\d µs = ×` + num + ` floor, p99 [+-]\d+\.\d µs = ×` + num + `; delivered=`,
		"the spread's gap repair row":      `(?m)^casting-mmsg +gap repair +1 +` + num + ` +` + num + ` +` + num + ` +` + num + `$`,
		"the lost-tail target":             `(?m)^lost tail p99 ≤ 1 ms +(met|NOT met) +in \d of 1 runs`,
		"the single-gap target on the repair cost, raw beside it": `(?m)^single gap repair p50, p99 ≤ 3× floor +(met|NOT met) +in \d of 1 runs: ×` +
			num + `/×` + num + ` \(raw ×` + num + `/×` + num + `\)$`,
		"what the repair cost is": `(?m)^single gap repair = \(single-gap − burst-lossless of the same run\)`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("no %s:\n%s", what, out)
		}
	}
}

// cast bench latency -nostatus runs cast send and cast recv -nostatus as
// processes, reports each run's largest gap before seq 2049 and where it
// was, the spread and the target, and exits 0: no Status and no probe
// crossed its relay, every record was delivered (the gap's size is the
// bench's business). At 5 000 rec/s the Status-off receiver's 2048-record
// window holds 400 ms of records: a loaded machine that does not run it
// for a while does not push it past its window (no flow control holds the
// sender back towards a receiver that sends no Status).
func TestCLIBenchLatencyNoStatus(t *testing.T) {
	b := runCast(t, "bench", "latency", "-nostatus", "-runs", "2", "-start-rate", "5000")
	b.expect(0, "stdout", `^load at the end `)
	out := b.Stdout.String()
	for what, re := range map[string]string{
		"each run's gap and where":  `(?m)^run [12]: largest gap before seq 2049: \d+\.\d{3} ms, between seq (\d+) and \d+; seq 2047 → 2049 \(the probe and the release\): \d+\.\d{3} ms; seqs 1…2049 crossed the tap in \d+\.\d{3} ms; 0 Status, 0 probes$`,
		"the spread and the target": `(?m)^largest gap before seq 2049: median \d+\.\d{3} ms, runs \d+\.\d{3}–\d+\.\d{3} ms; target ≤ 10ms: met in \d of 2 runs$`,
	} {
		if n := len(regexp.MustCompile(re).FindAllString(out, -1)); n == 0 || what == "each run's gap and where" && n != 2 {
			t.Fatalf("no %s:\n%s\n%s", what, out, b.Stderr.String())
		}
	}
}
