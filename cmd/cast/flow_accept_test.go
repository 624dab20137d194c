package main

// Issue 11's cross-process acceptance runs: `cast send -wal` unpaced into
// `cast recv -drop P` with every other flag at its default, and a slow
// consumer (`cast recv -consume-rate`). Small versions run as tests; the
// full-size figures come from the benchmarks (run them under the bench
// lock):
//
//	flock /tmp/walcast-bench.lock go test -run '^$' -bench 'FlowCrossProcess|FlowSlowConsumer' -benchtime 1x -count 3 ./cmd/cast/

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/internal/childproc"
)

// proc is a `cast` child process for the flow-control runs (tests and
// benchmarks alike), with its largest resident set sampled every 50 ms.
type proc struct {
	*childproc.Child
	maxRSS atomic.Int64 // KiB
}

func startProc(tb testing.TB, dir string, args ...string) *proc {
	tb.Helper()
	p := &proc{Child: childproc.Start(tb, childEnv+"=1", dir, args...)}
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.Done():
				return
			case <-tick.C:
				if kb := vmRSS(p.Cmd.Process.Pid); kb > p.maxRSS.Load() {
					p.maxRSS.Store(kb)
				}
			}
		}
	}()
	return p
}

// vmRSS is the resident set of pid in KiB (0 when unknown).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v
			}
		}
	}
	return 0
}

// flowRun is one cross-process run's outcome.
type flowRun struct {
	recvRate, sendRate float64 // records/s as each side printed it
	recvRSS            int64   // KiB, the receiver's largest resident set
	recvOut, sendOut   string
}

var (
	reReceived = regexp.MustCompile(`received (\d+) records \(seq (\d+)\.\.(\d+), in order: (\w+)\) in [0-9.]+ s: (\d+) rec/s`)
	reSent     = regexp.MustCompile(`sent (\d+) records \(\d+ bytes each\) in [0-9.]+ s: (\d+) rec/s`)
)

// crossProcess runs `cast recv -n n [recvArgs]` and `cast send -wal -n n
// [sendArgs]` with every other flag at its default, checks every record
// arrived once and in order with both exiting 0 and no sticky outcome,
// and returns the rates.
func crossProcess(tb testing.TB, n int, recvArgs, sendArgs []string) flowRun {
	tb.Helper()
	dir := tb.TempDir()
	r := startProc(tb, dir, append([]string{"recv", "-listen", "127.0.0.1:0", "-n", fmt.Sprint(n)}, recvArgs...)...)
	addr := "127.0.0.1:" + r.WaitOutput(`listening on \S+:(\d+)`, 30*time.Second)
	s := startProc(tb, dir, append([]string{"send", "-to", addr, "-wal", dir + "/wal", "-n", fmt.Sprint(n)}, sendArgs...)...)
	budget := 10*time.Minute + time.Duration(n)*time.Millisecond
	rc := r.Wait(budget)
	sc := s.Wait(budget)
	res := flowRun{recvRSS: r.maxRSS.Load(), recvOut: r.Stdout.String() + r.Stderr.String(), sendOut: s.Stdout.String() + s.Stderr.String()}
	if rc != 0 || sc != 0 {
		tb.Fatalf("recv exited %d, send exited %d\nrecv:\n%s\nsend:\n%s", rc, sc, res.recvOut, res.sendOut)
	}
	m := reReceived.FindStringSubmatch(res.recvOut)
	if m == nil || m[1] != fmt.Sprint(n) || m[2] != "1" || m[3] != fmt.Sprint(n) || m[4] != "true" || !strings.Contains(res.recvOut, "outcome: live") {
		tb.Fatalf("receiver did not get every record once, in order:\n%s", res.recvOut)
	}
	res.recvRate, _ = strconv.ParseFloat(m[5], 64)
	if m := reSent.FindStringSubmatch(res.sendOut); m != nil {
		res.sendRate, _ = strconv.ParseFloat(m[2], 64)
	}
	return res
}

// TestCLIFlowLoss: default flags deliver everything in order through 30 %
// loss, with neither side needing more than its defaults.
func TestCLIFlowLoss(t *testing.T) {
	for _, drop := range []string{"1", "30"} {
		t.Run("drop"+drop, func(t *testing.T) {
			r := crossProcess(t, 20000, []string{"-drop", drop}, nil)
			t.Logf("drop %s%%: %.0f rec/s received; receiver RSS %d KiB", drop, r.recvRate, r.recvRSS)
		})
	}
}

// TestCLIFlowSlowConsumer: a consumer at 5 000 records/s holds an
// unpaced sender back once the receive ring (8192) and the window are
// full; nothing is lost, nothing reconnects.
func TestCLIFlowSlowConsumer(t *testing.T) {
	const n, rate = 20000, 5000
	r := crossProcess(t, n, []string{"-consume-rate", fmt.Sprint(rate)}, nil)
	t.Logf("sender %.0f rec/s, receiver %.0f rec/s, receiver RSS %d KiB", r.sendRate, r.recvRate, r.recvRSS)
	m := regexp.MustCompile(`held the sender back (\d+) times`).FindStringSubmatch(r.sendOut)
	if m == nil || m[1] == "0" {
		t.Fatalf("the sender was never held back:\n%s", r.sendOut)
	}
	// At most ring + window records can go out before the consumer's pace
	// rules: the rest take (n − 8192 − 2048) / rate seconds at least.
	if minSecs := float64(n-8192-2048) / rate; float64(n)/r.sendRate < 0.8*minSecs {
		t.Fatalf("sender at %.0f rec/s: faster than a %d rec/s consumer allows", r.sendRate, rate)
	}
}

// BenchmarkFlowCrossProcess: 1 M records of 128 B, `cast send -wal`
// unpaced, `cast recv -drop P`, all other flags default. Reports the
// receiver's rate; the ratio to drop=0 is the acceptance figure (≥ 0.5 at
// 10 %).
func BenchmarkFlowCrossProcess(b *testing.B) {
	const n = 1_000_000
	for _, drop := range []string{"0", "1", "10", "30"} {
		b.Run("drop="+drop, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := crossProcess(b, n, []string{"-drop", drop}, nil)
				b.ReportMetric(r.recvRate, "rec/s")
				b.ReportMetric(float64(r.recvRSS)/1024, "recv-MiB")
			}
		})
	}
}

// BenchmarkFlowSlowConsumer: the sender unpaced, the consumer at a tenth
// of what the lossless run delivers (-consume-rate); reports both rates
// and the receiver's largest resident set.
func BenchmarkFlowSlowConsumer(b *testing.B) {
	const rate, n = 50_000, 500_000
	for i := 0; i < b.N; i++ {
		r := crossProcess(b, n, []string{"-consume-rate", fmt.Sprint(rate)}, nil)
		b.ReportMetric(r.sendRate, "send-rec/s")
		b.ReportMetric(r.recvRate, "recv-rec/s")
		b.ReportMetric(float64(r.recvRSS)/1024, "recv-MiB")
	}
}
