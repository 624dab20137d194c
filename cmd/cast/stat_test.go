package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/counters"
)

// statLines follows `cast stat -json -watch` (a third process) and keeps
// every refresh's view of each pid, with the refresh's time.
type statLines struct {
	views map[int][]processJSON
	since map[int][]float64 // rates_interval_s of each view
}

func (s *statLines) read(t *testing.T, r io.Reader) {
	s.views, s.since = map[int][]processJSON{}, map[int][]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var v statJSON
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Errorf("stat -json line: %v: %.200s", err, sc.Text())
			continue
		}
		for _, p := range v.Processes {
			s.views[p.PID] = append(s.views[p.PID], p)
			s.since[p.PID] = append(s.since[p.PID], p.RatesOver)
		}
	}
}

// lastOf is the last refresh that listed pid with counter label, and
// the largest change of label between two refreshes.
func lastOf(views []processJSON, label string) (last uint64, step uint64, ok bool) {
	var prev uint64
	for i, v := range views {
		x, has := v.Counters[label]
		if !has {
			continue
		}
		if i > 0 && x > prev && x-prev > step {
			step = x - prev
		}
		prev, last, ok = x, x, true
	}
	return last, step, ok
}

// checkRates: every rate of a refresh is the change of its counter since
// the refresh before, over the time between the writer's copies they
// read (rates_interval_s).
func (s *statLines) checkRates(t *testing.T, pid int) (checked int) {
	vs := s.views[pid]
	for i := 1; i < len(vs); i++ {
		d := s.since[pid][i]
		for label, r := range vs[i].Rates {
			a, okA := vs[i-1].Counters[label]
			b, okB := vs[i].Counters[label]
			if !okA || !okB || b < a {
				continue
			}
			want := float64(b-a) / d
			if math.Abs(r-want) > 1e-9*max(1, want) {
				t.Errorf("pid %d %s: rate %v, want (%d−%d)/%.6fs = %v", pid, label, r, b, a, d, want)
			}
			checked++
		}
	}
	return checked
}

func atoi(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCLIStatCrossProcess: `cast send -wal` → `cast recv -drop 1`, both
// holding their counters' final values for a while (-hold); `cast stat
// -json -watch` in a third process lists both under one stream label,
// and the NAKs, retransmits (ring and WAL apart) and delivered seq it saw
// last are each side's final summary (the last refresh came during the
// hold, so they are equal, within one refresh by far); every rate it
// printed is the change over the time between two refreshes; both
// commands print progress lines from the same counters. Midway a reader
// truncates both counters files: the writers run on, and the files come
// back with a note in their error logs.
func TestCLIStatCrossProcess(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WALCAST_COUNTERS", dir)
	const n = 40000
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", strconv.Itoa(n), "-drop", "1", "-idle", "park", "-hold", "3s", "-progress", "200ms")
	addr := r.listenAddr()
	st := startCast(t, "", "stat", "-json", "-watch", "-interval", "50ms", "-dir", dir)
	s := startCast(t, "", "send", "-to", addr, "-bind", "127.0.0.1:0", "-n", strconv.Itoa(n), "-rate", "20000", "-linger", "5s",
		"-wal", filepath.Join(t.TempDir(), "wal"), "-idle", "park", "-hold", "3s", "-progress", "200ms")
	// A reader truncates both files mid-run: neither writer notices more
	// than a note in its error log.
	files := []string{filepath.Join(dir, strconv.Itoa(r.Cmd.Process.Pid)+counters.Suffix), filepath.Join(dir, strconv.Itoa(s.Cmd.Process.Pid)+counters.Suffix)}
	for _, f := range files {
		for deadline := time.Now().Add(hangBudget); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(f); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no counters file %s", f)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	for _, f := range files {
		if err := os.Truncate(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	s.wait(hangBudget)
	r.wait(hangBudget)
	s.expect(0, "stdout", `^wal .*durable through seq`)
	r.expect(0, "stdout", `^outcome: live$`)
	st.signal(os.Interrupt)
	st.wait(hangBudget)
	sl := &statLines{}
	sl.read(t, strings.NewReader(st.Stdout.String()))

	naks := regexp.MustCompile(`naks (\d+), retransmits \d+ \(hot ring (\d+), WAL (\d+)\)`).FindStringSubmatch(s.Stdout.String())
	gaps := regexp.MustCompile(`gaps NAKed (\d+) \(\d+ seqs\), duplicates (\d+)`).FindStringSubmatch(r.Stdout.String())
	if naks == nil || gaps == nil {
		t.Fatalf("summaries:\n%s\n%s", s.Stdout.String(), r.Stdout.String())
	}
	var sendPID, recvPID int
	for pid, v := range sl.views {
		switch {
		case strings.Contains(v[0].Command, " send "):
			sendPID = pid
		case strings.Contains(v[0].Command, " recv "):
			recvPID = pid
		}
	}
	if sendPID == 0 || recvPID == 0 {
		t.Fatalf("stat never listed both: %v", sl.views)
	}
	for _, c := range []struct {
		pid   int
		label string
		final uint64
	}{
		{sendPID, `naks_received{stream="1",role="producer"}`, atoi(t, naks[1])},
		{sendPID, `retx_hot{stream="1",role="producer"}`, atoi(t, naks[2])},
		{sendPID, `retx_cold{stream="1",role="producer"}`, atoi(t, naks[3])},
		{sendPID, `records_sent{stream="1",role="producer"}`, n},
		{recvPID, `naks_sent{stream="1",role="consumer"}`, atoi(t, gaps[1])},
		{recvPID, `duplicates{stream="1",role="consumer"}`, atoi(t, gaps[2])},
		{recvPID, `delivered_seq{stream="1",role="consumer"}`, n},
	} {
		last, step, ok := lastOf(sl.views[c.pid], c.label)
		if !ok {
			t.Errorf("%s never listed for pid %d", c.label, c.pid)
			continue
		}
		if last != c.final {
			t.Errorf("%s: last seen %d, final summary %d (largest change in one refresh %d)", c.label, last, c.final, step)
		}
	}
	if atoi(t, gaps[1]) == 0 {
		t.Error("-drop 1 caused no NAK")
	}
	for _, pid := range []int{sendPID, recvPID} {
		vs, noted := sl.views[pid], false
		for _, e := range vs[len(vs)-1].Errors {
			noted = noted || strings.Contains(e.Message, "cut short by another process: restored")
		}
		if !noted {
			t.Errorf("pid %d: the truncation is not in the error log: %+v", pid, vs[len(vs)-1].Errors)
		}
	}
	if sl.checkRates(t, sendPID)+sl.checkRates(t, recvPID) == 0 {
		t.Error("no rate printed")
	}
	// Progress lines, from the same counters, on stderr.
	for _, c := range []struct {
		ch *child
		re string
	}{{s, `(?m)^sent \d+ \([\d.]+k? rec/s\), naks \d+, retransmits \d+ \(hot ring \d+, WAL \d+\), receivers 1,`},
		{r, `(?m)^delivered \d+ \([\d.]+k? rec/s\), naks \d+, duplicates \d+, loss episodes \d+,`}} {
		if !regexp.MustCompile(c.re).MatchString(c.ch.Stderr.String()) {
			t.Errorf("no progress line /%s/ in\n%s", c.re, c.ch.Stderr.String())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left after both exited: %v", ents)
	}
}

// TestCLIStatMetrics: /metrics while a receiver waits shows its counters
// in the text format, labelled with its pid.
func TestCLIStatMetrics(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WALCAST_COUNTERS", dir)
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "1000000")
	s := startCast(t, "", "send", "-to", r.listenAddr(), "-bind", "127.0.0.1:0", "-n", "1000000", "-rate", "10000", "-idle", "park")
	srv := startCast(t, "", "stat", "-serve", "127.0.0.1:0", "-dir", dir)
	u := "http://" + regexp.MustCompile(`http://(\S+)/metrics`).FindStringSubmatch(srv.waitOutput(`at http://\S+/metrics`, hangBudget))[1] + "/metrics"
	pid := r.Cmd.Process.Pid
	want := fmt.Sprintf(`(?m)^walcast_records_delivered_total\{pid="%d",role="consumer",stream="1"\} [1-9]\d*$`, pid)
	var body string
	for deadline := time.Now().Add(hangBudget); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if regexp.MustCompile(want).MatchString(body) {
			break
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	if !regexp.MustCompile(want).MatchString(body) || !strings.Contains(body, "# TYPE walcast_records_delivered_total counter") {
		t.Fatalf("no /%s/ in\n%s", want, body)
	}
	s.signal(syscall.SIGKILL)
	r.signal(syscall.SIGKILL)
	s.wait(hangBudget)
	r.wait(hangBudget)
	srv.signal(os.Interrupt)
	srv.wait(hangBudget)
}

// TestCLIStatStale: a receiver killed with SIGKILL leaves its file;
// `cast stat` reports it stale and -clean removes it.
func TestCLIStatStale(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WALCAST_COUNTERS", dir)
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0")
	s := startCast(t, "", "send", "-to", r.listenAddr(), "-bind", "127.0.0.1:0", "-n", "1000000", "-rate", "10000", "-idle", "park")
	defer func() { s.signal(syscall.SIGKILL); s.wait(hangBudget) }()
	pid := r.Cmd.Process.Pid
	file := filepath.Join(dir, strconv.Itoa(pid)+counters.Suffix)
	for deadline := time.Now().Add(hangBudget); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(file); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no counters file %s", file)
		}
	}
	st := runCast(t, "stat", "-dir", dir)
	st.expect(0, "stdout", `.`)
	if !strings.Contains(st.Stdout.String(), fmt.Sprintf("pid %d  live", pid)) {
		t.Fatalf("stat:\n%s", st.Stdout.String())
	}
	r.signal(syscall.SIGKILL)
	r.wait(hangBudget)
	st = runCast(t, "stat", "-dir", dir)
	if !strings.Contains(st.Stdout.String(), fmt.Sprintf("pid %d  stale", pid)) {
		t.Fatalf("after SIGKILL:\n%s", st.Stdout.String())
	}
	runCast(t, "stat", "-clean", "-dir", dir).expect(0, "stdout", `^1 stale file\(s\) removed$`)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("stale file not removed: %v", err)
	}
}
