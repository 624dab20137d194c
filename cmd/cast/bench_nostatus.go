package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/benchkit"
)

// startGapTarget is the longest gap the stream may have before the end of
// its first window towards a receiver that sends no Status.
const startGapTarget = 10 * time.Millisecond

// benchStartNoStatus is `cast bench latency -nostatus`: per run, `cast
// send -rate rate` and `cast recv -nostatus` (the reference receiver's
// bytes: never a Status) as separate processes on loopback, through a
// relay in this process that stamps the first arrival of each seq; the
// figure is the largest gap between consecutive seqs before the first
// window's end (seq DefaultReorderSlots+1), against startGapTarget.
func benchStartNoStatus(w io.Writer, runs, rate int, check bool) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	last := uint64(protocol.DefaultReorderSlots + 1)
	n := 2 * int(last)
	fmt.Fprintf(w, "start against a Status-off receiver: cast send -rate %d -n %d → relay → cast recv -nostatus, separate processes on loopback; largest gap before seq %d; %d runs, %s, load %s\n",
		rate, n, last, runs, time.Now().UTC().Format(time.RFC3339), benchkit.LoadAvg())
	var gaps, edges []time.Duration
	failed := 0
	for run := 1; run <= runs; run++ {
		if ctx.Err() != nil {
			return interruptedf("bench latency -nostatus stopped")
		}
		g, err := startRun(ctx, exe, rate, n, last)
		if err != nil {
			failed++
			fmt.Fprintf(w, "run %d: FAILED: %v\n", run, err)
			continue
		}
		gaps, edges = append(gaps, g.gap), append(edges, g.edge)
		fmt.Fprintf(w, "run %d: %v\n", run, g)
	}
	met := 0
	for _, g := range gaps {
		if g <= startGapTarget {
			met++
		}
	}
	if len(gaps) > 0 {
		spread := func(ds []time.Duration) string {
			slices.Sort(ds)
			ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
			return fmt.Sprintf("median %s ms, runs %s–%s ms", ms(ds[len(ds)/2]), ms(ds[0]), ms(ds[len(ds)-1]))
		}
		fmt.Fprintf(w, "largest gap before seq %d: %s; target ≤ %v: met in %d of %d runs\n", last, spread(gaps), startGapTarget, met, len(gaps))
		fmt.Fprintf(w, "seq %d → %d (the window's last record, sent after a heartbeat naming it, and the release once a NAK came with no Status): %s\n",
			last-2, last, spread(edges))
	}
	fmt.Fprintf(w, "load at the end %s\n", benchkit.LoadAvg())
	if failed > 0 {
		return failf("%d of %d runs failed", failed, runs)
	}
	if check && met < len(gaps) {
		return failf("the largest gap before seq %d was over %v in %d of %d runs", last, startGapTarget, len(gaps)-met, len(gaps))
	}
	return nil
}

var receivingOn = regexp.MustCompile(`receiving on (\S+) `)

// startRun is one run of benchStartNoStatus: both processes must exit 0,
// the receiver live with every record.
func startRun(ctx context.Context, exe string, rate, n int, last uint64) (startGap, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(n)*time.Second/time.Duration(rate))
	defer cancel()
	tap, err := newStartTap()
	if err != nil {
		return startGap{}, err
	}
	defer tap.close()
	var rout, rerr bytes.Buffer // read once the process exited and its stderr was drained
	recv := exec.CommandContext(ctx, exe, "recv", "-listen", "127.0.0.1:0", "-peer", tap.recvSide(), "-n", strconv.Itoa(n), "-nostatus")
	recv.Stdout = &rout
	pipe, err := recv.StderrPipe()
	if err != nil {
		return startGap{}, err
	}
	if err := recv.Start(); err != nil {
		return startGap{}, err
	}
	addr := make(chan string, 1)
	drained := make(chan struct{})
	go func() { // the receiver's stderr: its address, then the rest kept
		defer close(drained)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			fmt.Fprintln(&rerr, sc.Text())
			if m := receivingOn.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	recvExit := func() error {
		<-drained
		if err := recv.Wait(); err != nil {
			return fmt.Errorf("cast recv: %v\n%s%s", err, rout.String(), rerr.String())
		}
		if !bytes.Contains(rout.Bytes(), []byte("outcome: live")) {
			return fmt.Errorf("cast recv did not end live:\n%s%s", rout.String(), rerr.String())
		}
		return nil
	}
	var a string
	select {
	case a = <-addr:
	case <-drained:
		return startGap{}, recvExit()
	case <-ctx.Done():
		_ = recvExit()
		return startGap{}, fmt.Errorf("cast recv did not start: %v", ctx.Err())
	}
	ap, err := netip.ParseAddrPort(a)
	if err != nil {
		_ = recv.Process.Kill()
		_ = recvExit()
		return startGap{}, fmt.Errorf("cast recv: address %q: %v", a, err)
	}
	tap.relay(ap)
	send := exec.CommandContext(ctx, exe, "send", "-to", tap.senderSide(), "-bind", "127.0.0.1:0", "-n", strconv.Itoa(n), "-rate", strconv.Itoa(rate), "-linger", "1s")
	if out, err := send.CombinedOutput(); err != nil {
		_ = recv.Process.Kill()
		_ = recvExit()
		return startGap{}, fmt.Errorf("cast send: %v\n%s", err, out)
	}
	if err := recvExit(); err != nil {
		return startGap{}, err
	}
	g, err := tap.gapBefore(last)
	if err == nil && (g.statuses != 0 || g.probes != 0) {
		err = fmt.Errorf("recv -nostatus: %d Status and %d probes crossed the relay", g.statuses, g.probes)
	}
	return g, err
}
