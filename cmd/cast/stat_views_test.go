package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/counters"
)

// statFixture writes a counters file for this test process in a fresh
// directory: counters it raises until the test ends (one with a label
// beyond stream and role: a keyed consumer's refusals by reason), a
// counter of ns, a gauge, two loss episodes and an error seen twice.
func statFixture(t *testing.T) (dir string, at time.Time) {
	t.Helper()
	dir = t.TempDir()
	f, err := counters.Acquire(counters.Config{Dir: dir})
	if err != nil || f.Err() != nil {
		t.Fatal(err, f.Err())
	}
	sent, _ := f.Counter(counters.KindCounter, `records_sent{stream="1",role="producer"}`)
	busy, _ := f.Counter(counters.KindCounterNs, `loop_busy_ns{stream="1",role="producer",loop="1"}`)
	edge, _ := f.Counter(counters.KindGauge, `window_edge{stream="1",role="producer"}`)
	refused, _ := f.Counter(counters.KindCounter, `auth_refused{stream="1",role="consumer",reason="tag"}`)
	edge.Store(4096)
	sent.Store(1)
	refused.Store(1)
	busy.Store(1e6)
	at = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t0 := at.UnixNano()
	f.CloseLoss(f.OpenLoss(counters.Loss{Stream: 1, Role: counters.RoleConsumer, First: 10, At: t0}),
		counters.Loss{Stream: 1, Role: counters.RoleConsumer, First: 10, Count: 3, Naks: 1, At: t0, Done: t0 + 2e6, Repair: counters.RepairUDP})
	f.CloseLoss(f.OpenLoss(counters.Loss{Stream: 1, Role: counters.RoleProducer, First: 10, At: t0}),
		counters.Loss{Stream: 1, Role: counters.RoleProducer, First: 10, Count: 1, Naks: 1, At: t0, Done: t0 + 3e6, Repair: counters.RepairRing})
	f.Error(1, counters.RoleConsumer, "receiver faulted: silence with a gap open", t0)
	f.Error(1, counters.RoleConsumer, "receiver faulted: silence with a gap open", t0+1e9)
	f.Flush()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the counters move: 1000 records and 5 ms of work every 10 ms
		defer wg.Done()
		for i := uint64(1); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				sent.Store(1000 * i)
				busy.Store(5e6 * i)
				refused.Store(2 * i)
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait(); f.Release() })
	return dir, at
}

// TestCLIStatViews: cast stat's table, -watch (rates), -loss, -errors and
// -json -watch (rates_per_s is each counter's change over rates_interval_s)
// read a counters file with known contents.
func TestCLIStatViews(t *testing.T) {
	dir, at := statFixture(t)
	me := os.Getpid()
	clock := at.Format("15:04:05.000000")

	st := runCast(t, "stat", "-dir", dir)
	st.expect(0, "stdout", `auth_refused\[reason=tag\]`)
	for _, re := range []string{fmt.Sprintf(`(?m)^pid %d  live  up `, me), `(?m)^  STREAM ROLE      COUNTER +VALUE$`,
		`(?m)^  1      producer  window_edge +4096$`, `(?m)^  1      producer  loop_busy_ns\[loop=1\] +[\d.]+(ms|s)$`,
		`(?m)^  1      consumer  auth_refused\[reason=tag\] +[1-9]\d*$`} {
		if !regexp.MustCompile(re).MatchString(st.Stdout.String()) {
			t.Errorf("stat: no /%s/ in\n%s", re, st.Stdout.String())
		}
	}

	w := runCast(t, "stat", "-dir", dir, "-watch", "-n", "2", "-interval", "300ms")
	w.expect(0, "stdout", `.`)
	for _, re := range []string{`(?m)^  STREAM ROLE      COUNTER +VALUE +/s$`, `(?m)^  1      producer  records_sent +\d+ +[1-9]\d*$`,
		`(?m)^  1      producer  loop_busy_ns\[loop=1\] +\S+ +[1-9]\d*%$`, `(?m)^  1      producer  window_edge +4096 +$`,
		`(?m)^  1      consumer  auth_refused\[reason=tag\] +\d+ +[1-9]\d*$`} {
		if !regexp.MustCompile(re).MatchString(w.Stdout.String()) {
			t.Errorf("stat -watch: no /%s/ in\n%s", re, w.Stdout.String())
		}
	}

	l := runCast(t, "stat", "-dir", dir, "-loss")
	l.expect(0, "stdout", `.`)
	for _, re := range []string{`(?m)^  loss episodes: 2 ever, the last 2 kept$`,
		`(?m)^  STREAM ROLE +REPAIR +FIRST SEQ +SEQS +NAKS SEEN +REPAIRED +LATENCY$`,
		`(?m)^  1 +consumer +udp +10 +3 +1 ` + regexp.QuoteMeta(clock) + ` +03:04:05.002000 +2ms$`,
		`(?m)^  1 +producer +ring +10 +1 +1 ` + regexp.QuoteMeta(clock) + ` +03:04:05.003000 +3ms$`} {
		if !regexp.MustCompile(re).MatchString(l.Stdout.String()) {
			t.Errorf("stat -loss: no /%s/ in\n%s", re, l.Stdout.String())
		}
	}

	e := runCast(t, "stat", "-dir", dir, "-errors")
	e.expect(0, "stdout", `.`)
	for _, re := range []string{`(?m)^  distinct errors: 1 \(0 more occurrences found no free entry\)$`,
		`(?m)^ +2 ` + regexp.QuoteMeta(clock) + ` 03:04:06.000000 1 +consumer +receiver faulted: silence with a gap open$`} {
		if !regexp.MustCompile(re).MatchString(e.Stdout.String()) {
			t.Errorf("stat -errors: no /%s/ in\n%s", re, e.Stdout.String())
		}
	}

	j := runCast(t, "stat", "-dir", dir, "-json", "-watch", "-n", "3", "-interval", "200ms")
	j.expect(0, "stdout", `^\{`)
	sl := &statLines{}
	sl.read(t, strings.NewReader(j.Stdout.String()))
	if len(sl.views[me]) != 3 || sl.checkRates(t, me) == 0 {
		t.Fatalf("%d views, rates %v", len(sl.views[me]), sl.views[me])
	}
	last := sl.views[me][2]
	for _, lab := range []string{`records_sent{stream="1",role="producer"}`, `auth_refused{stream="1",role="consumer",reason="tag"}`} {
		if r := last.Rates[lab]; r <= 0 {
			t.Errorf("%s rate %v", lab, r)
		}
	}
	if len(last.Loss) != 2 || last.Loss[0].Repair != "udp" || last.Loss[0].LatencyNs != 2e6 || len(last.Errors) != 1 || last.Errors[0].Count != 2 {
		t.Errorf("json loss %+v errors %+v", last.Loss, last.Errors)
	}
}

// TestCLIRecvProgressJSON: with -json and -progress, stdout stays one
// JSON object per line (the progress lines go to stderr).
func TestCLIRecvProgressJSON(t *testing.T) {
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "3000", "-json", "-progress", "50ms")
	runCast(t, "send", "-to", r.listenAddr(), "-bind", "127.0.0.1:0", "-n", "3000", "-rate", "5000").expect(0, "stdout", `^naks`)
	r.wait(hangBudget)
	lines := strings.Split(strings.TrimSpace(r.Stdout.String()), "\n")
	records := 0
	for _, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		if _, ok := v["len"]; ok { // a record (events have no len)
			records++
		}
	}
	if records != 3000 {
		t.Errorf("%d records on stdout", records)
	}
	progress := regexp.MustCompile(`(?m)^delivered (\d+) \(`).FindAllStringSubmatch(r.Stderr.String(), -1)
	if len(progress) == 0 {
		t.Fatalf("no progress line on stderr:\n%s", r.Stderr.String())
	}
	for _, p := range progress {
		if n, _ := strconv.Atoi(p[1]); n > 3000 {
			t.Errorf("progress says %d delivered", n)
		}
	}
}
