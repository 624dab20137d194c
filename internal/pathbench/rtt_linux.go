package pathbench

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/xdp"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/internal/netns"
	"github.com/walcast/walcast/wire"
)

// rttRun measures one run of the rtt workload: every spec's round trips
// are taken in c.Blocks blocks, interleaved across specs (A B C, A B C, …
// with fresh paths each time), so load that comes and goes on a shared
// machine falls on every spec alike; a spec's row pools its blocks.
func rttRun(c Config, specs []Spec, pr *netns.Pair, sys *bpf.SyscallCounter) []Row {
	blocks := max(1, min(c.Blocks, c.N))
	rows := make([]Row, len(specs))
	samples := make([]*benchkit.Samples, len(specs))
	for i := range specs {
		samples[i] = benchkit.NewSamples(c.N)
	}
	done := make([]int, len(specs)) // round trips measured so far
	for b := range blocks {
		n := c.N*(b+1)/blocks - c.N*b/blocks
		for i, s := range specs {
			if b > 0 && !rows[i].Measured() {
				continue // refused or failed: not again
			}
			r := rtt(c, s, pr, sys, n, c.Warmup/blocks+min(c.Warmup, 100), samples[i])
			if b == 0 {
				rows[i] = r
			} else if !r.Measured() {
				rows[i].Failed, rows[i].Refused = r.Failed, r.Refused
			} else {
				rows[i].A = mergeThread(rows[i].A, done[i], r.A, n)
				rows[i].B = mergeThread(rows[i].B, done[i], r.B, n)
				rows[i].Seconds += r.Seconds
				rows[i].Note = r.Note
			}
			done[i] += n
		}
	}
	for i := range rows {
		if rows[i].Measured() {
			rows[i].Latency = samples[i].Summarize()
			rows[i].Records = int64(samples[i].Len())
			rows[i].RecPerS = float64(rows[i].Records) / rows[i].Seconds
			rows[i].Note = fmt.Sprintf("%d blocks; %s", blocks, rows[i].Note)
		}
	}
	return rows
}

// mergeThread is the weighted mean of two per-operation readings (n/a
// stays n/a).
func mergeThread(a Thread, na int, b Thread, nb int) Thread {
	m := func(x, y float64) float64 {
		if x < 0 || y < 0 {
			return -1
		}
		return (x*float64(na) + y*float64(nb)) / float64(na+nb)
	}
	out := Thread{CPUNs: m(a.CPUNs, b.CPUNs), SysPct: m(a.SysPct, b.SysPct), Syscalls: m(a.Syscalls, b.Syscalls),
		CtxSw: m(a.CtxSw, b.CtxSw), Involuntary: m(a.Involuntary, b.Involuntary), RunqNs: m(a.RunqNs, b.RunqNs), Why: a.Why}
	if out.Why == "" {
		out.Why = b.Why
	}
	return out
}

// rtt is a casting ping-pong over spec s between the pair's hosts: the
// client loop on A sends one record and waits for the echo loop on B to
// send it back on its own stream; the round trip is timed on the client
// loop's clock and n of them (after warmup) go into samples. The probes'
// phase boundaries run on the client loop thread (first measured ping,
// last echo). The row holds the counters, not the latency.
func rtt(c Config, s Spec, pr *netns.Pair, sys *bpf.SyscallCounter, n, warmup int, samples *benchkit.Samples) Row {
	row := newRow("rtt", s, c.Size)
	pa, pb, err := openPair(s, pr.A, pr.B, false)
	if err != nil {
		return refusedOrFailed(row, err)
	}
	var tidA, tidB atomic.Int64
	ecfg, err := loopCfg(c, 1, pb, s.Batch, true, true, &tidB)
	if err != nil {
		pa.Close()
		pb.Close()
		return failed(row, err)
	}
	ecfg.OnRecord = func(l *cast.Loop, h wire.Header, p []byte) { _, _ = l.Send(h.Type, p) }
	echo, err := cast.StartLoop(ecfg)
	if err != nil {
		pa.Close()
		return failed(row, err)
	}

	total := warmup + n
	payload := make([]byte, payloadLen(c.Size))
	var (
		i           int
		t0          int64
		outstanding bool
		sendErr     error
		start, end  time.Time
		probes      [2]*probe
		ready       atomic.Bool // probes are open
		done        = make(chan struct{})
	)
	ping := func(l *cast.Loop) {
		putIndex(payload, uint64(i))
		t0 = l.Now()
		if _, err := l.Send(1, payload); err != nil {
			if !sendOK(err) {
				sendErr = err
				i = total
				close(done)
			}
			return
		}
		outstanding = true
	}
	ccfg, err := loopCfg(c, 0, pa, s.Batch, true, true, &tidA)
	if err != nil {
		echo.Close()
		pa.Close()
		return failed(row, err)
	}
	ccfg.OnPoll = func(l *cast.Loop, _ int64) {
		noteTID(&tidA)
		// Ping only once the probes are open, so the warm-up ends after.
		if !outstanding && i < total && ready.Load() {
			ping(l)
		}
	}
	ccfg.OnRecord = func(l *cast.Loop, _ wire.Header, p []byte) {
		if !payloadOK(p) || getIndex(p) != uint64(i) || !outstanding {
			return
		}
		d := l.Now() - t0
		outstanding = false
		if i >= warmup {
			samples.Record(d)
		}
		i++
		switch i {
		case warmup:
			start = time.Now()
			probes[0].begin()
			probes[1].begin()
		case total:
			end = time.Now()
			probes[0].end(int64(n))
			probes[1].end(int64(n))
			close(done)
			return
		}
		ping(l)
	}
	client, pA, pB, err := startProbed(ccfg, echo, &tidA, &tidB, sys)
	if err != nil {
		return failed(row, err)
	}
	probes[0], probes[1] = pA, pB
	defer probes[0].close()
	defer probes[1].close()
	if warmup == 0 { // no warm-up: the first ping starts the phase
		start = time.Now()
		probes[0].begin()
		probes[1].begin()
	}
	bp0 := busyPollRx(pr.A, pr.B)
	ready.Store(true)
	limit := max(30*time.Second, time.Duration(total)*time.Millisecond)
	var timedOut bool
	select {
	case <-done:
	case <-client.Done():
	case <-echo.Done():
	case <-time.After(limit):
		timedOut = true
	}
	note := pathNote(pa)
	bp1 := busyPollRx(pr.A, pr.B)
	cerr := closeAll(client, echo)
	xa, xb := xdpStats(pa), xdpStats(pb) // after the loops stopped (and closed the paths)
	switch {
	case sendErr != nil:
		return failed(row, sendErr)
	case timedOut:
		return failed(row, fmt.Errorf("timed out after %d of %d round trips", i, total))
	case i < total:
		return failed(row, fmt.Errorf("a loop stopped after %d of %d round trips: %v", i, total, cerr))
	}
	row.Seconds = end.Sub(start).Seconds()
	row.A, row.B = probes[0].thread(int64(n)), probes[1].thread(int64(n))
	row.Note = note
	if xa != nil {
		per := float64(total)
		row.Note += fmt.Sprintf("; busy polling %v/%v; client per round trip: %.2f TX kicks, %.2f RX kicks; echo: %.2f TX kicks, %.2f RX kicks",
			xa.BusyPolling, xb.BusyPolling, float64(xa.TxKicks)/per, float64(xa.RecvKicks)/per, float64(xb.TxKicks)/per, float64(xb.RecvKicks)/per)
	}
	if s.BusyPoll > 0 && bp0 >= 0 && bp1 >= 0 {
		row.Note += fmt.Sprintf("; packets taken by busy polling: %d (TcpExt BusyPollRxPackets, both hosts)", bp1-bp0)
	}
	if cs, es := client.Stats(), echo.Stats(); true {
		per := float64(total)
		row.Note += fmt.Sprintf("; loop per round trip: client %.0f iterations %.2f flushes %.2f datagrams, echo %.0f iterations %.2f flushes %.2f datagrams",
			float64(cs.Iterations)/per, float64(cs.Flushes)/per, float64(cs.Datagrams)/per, float64(es.Iterations)/per, float64(es.Flushes)/per, float64(es.Datagrams)/per)
	}
	if n := client.ReceiverStats().NaksSent + echo.ReceiverStats().NaksSent; n > 0 {
		row.Note += fmt.Sprintf("; %d NAKs", n)
	}
	return row
}

// xdpStats returns the path's counters if it is an AF_XDP path.
func xdpStats(p datapath.Path) *xdp.Stats {
	if x, ok := p.(*xdp.Path); ok {
		s := x.Stats()
		return &s
	}
	return nil
}

func newRow(workload string, s Spec, size int) Row {
	return Row{Row: benchkit.Row{Workload: workload, Name: s.Name, Path: s.Kind, Mode: "spin"}, Spec: s.Name, Size: size}
}

func failed(r Row, err error) Row {
	r.Failed = err.Error()
	return r
}

func refusedOrFailed(r Row, err error) Row {
	if isRefused(err) {
		r.Refused = err.Error()
		return r
	}
	return failed(r, err)
}
