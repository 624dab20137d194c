package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/internal/benchkit"
)

func init() {
	registerBench("cost", "CPU ns per record of each layer on each side (thread CPU from the kernel), next to the floor's, at 144 B and 1443 B", benchCost)
}

func benchCost(args []string) error {
	fs := newFlagSet("bench cost", "[flags]", `Where the CPU goes, per record: one-way blasts on loopback (sender thread
pinned to the first -pin CPU, receiver thread to the second, at most -window
records in flight), one row per layer stack, each row the one before plus one
layer:
  floor-gso-gro   raw sendto with UDP_SEGMENT / recvmsg with UDP_GRO (the
                  floor's sockets and system calls, nothing of ours)
  floor+frame     beside the stack, not a layer of it: the floor plus the wire
                  format's per-record work (each record copied into a ring of
                  the hot ring's size, its seq stamped, sealed with CRC32C;
                  decoded and checked on receive), the least any sender that
                  retransmits from memory and any checking receiver can do;
                  the row after it is compared with floor-gso-gro
  datapath        datapath/mmsg: batch.Vec, sendmmsg with GSO, recvmmsg with GRO;
                  a send's frames are views of one buffer, back to back (one
                  iovec, as a run from the casting Sender's hot ring)
  +framing/crc    the same, every record sealed in place on send (16-byte
                  header, CRC32C of the payload), decoded and checked on receive
  +ring-copy      the same, every record first copied from the producer's
                  buffer into the next slot of a ring the hot ring's size, the
                  batch made of views of those slots (the Sender's copy)
  casting-noflow  a cast.Loop on each side: the protocol Sender (seqs, hot-ring
                  copy, batching, probes) and Receiver (reorder, deliver);
                  no flow control, no Status frames
  casting         the same with flow control and Status frames (the defaults)
  casting+wal     the same with every record appended to a WAL first (the
                  Sender's log; the WAL's I/O goroutine writes and syncs)
  wal-alone       one thread appending to a wal.Writer, no network
For each thread: its CPU time from the kernel (CLOCK_THREAD_CPUTIME_ID, read by
the thread once per poll during the traffic), less the time of its idle polls
(polls that found nothing to do, or a shut window; each is charged the CPU time
since the previous read): "work". One clock read per poll is in the figures. send = sender's work per
record sent, recv = receiver's per record delivered, other = every other thread
of the process (the WAL's I/O goroutine, the Go runtime: process CPU from
getrusage less the two threads), softirq = the kernel's ksoftirqd threads
(machine-wide: network work deferred there rather than run in our threads'
context), total = send + recv + other; busy = work / CPU time of the thread.
Δ columns: what the row adds to the row before it. Rows run interleaved -runs
times; the summary gives the median and the min–max.
Run it under the bench lock: flock /tmp/walcast-bench.lock cast bench cost`)
	c := benchkit.DefaultThroughputConfig()
	sizes := fs.String("sizes", "144,1443", "frame sizes in bytes, comma-separated")
	rowsFlag := fs.String("rows", strings.Join(benchkit.CostRows, ","), "rows to run, comma-separated")
	fs.DurationVar(&c.Duration, "d", c.Duration, "sending time per row")
	fs.IntVar(&c.Batch, "batch", c.Batch, "datagrams per recvmmsg, and records per send call: with GSO at most one UDP_SEGMENT send's worth (65000 bytes: 45 frames at 1443 B) in every row, the floor's unit")
	fs.IntVar(&c.Window, "window", c.Window, "records in flight at most (the sender waits for the receiver)")
	fs.StringVar(&c.Dir, "dir", os.TempDir(), "directory for the WAL rows")
	runs := fs.Int("runs", 3, "interleaved runs of every row")
	pin := fs.String("pin", "0,1", "CPUs of the sender and receiver threads, or none")
	md := fs.Bool("md", false, "print the summary as a Markdown table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRange("d", c.Duration, 10*time.Millisecond, time.Hour); err != nil {
		return err
	}
	if err := checkRange("batch", c.Batch, 1, 1024); err != nil {
		return err
	}
	if err := checkRange("window", c.Window, 1, 1<<30); err != nil {
		return err
	}
	if err := checkRange("runs", *runs, 1, 100); err != nil {
		return err
	}
	var err error
	if c.CPUs, err = parsePins(*pin); err != nil {
		return err
	}
	sz, err := parseFrameSizes(*sizes)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range strings.Split(*rowsFlag, ",") {
		s = strings.TrimSpace(s)
		ok := false
		for _, k := range benchkit.CostRows {
			ok = ok || k == s
		}
		if !ok {
			return usagef("-rows: no row %q (have %s)", s, strings.Join(benchkit.CostRows, ", "))
		}
		names = append(names, s)
	}
	ctx, cancel := signalContext()
	defer cancel()
	fmt.Printf("cost: %v per row, batch %d, window %d, pins %s, dir %s, %d runs, %s, load %s\n",
		c.Duration, c.Batch, c.Window, *pin, c.Dir, *runs, time.Now().UTC().Format(time.RFC3339), benchkit.LoadAvg())
	fmt.Println("run  size  row             send ns  busy  recv ns  busy  other ns  softirq ns  total ns     rec/s  note")
	var rows []benchkit.CostRow
	failed := 0
	interrupted := false
loop:
	for run := 1; run <= *runs; run++ {
		for _, size := range sz {
			for _, name := range names {
				if ctx.Err() != nil {
					interrupted = true
					break loop
				}
				c.Size = size
				r, err := benchkit.Cost(name, c)
				r.Run, r.Name, r.Size = run, name, size
				if err != nil {
					failed++
					fmt.Printf("%3d  %4d  %-14s  FAILED: %v\n", run, size, name, err)
					continue
				}
				rows = append(rows, r)
				fmt.Printf("%3d  %4d  %-14s %8.1f  %3.0f%% %8.1f  %3.0f%% %9.1f  %10.1f  %8.1f  %8.0f  %s\n", run, size, name,
					r.SendNS(), busy(r.Send), r.RecvNS(), busy(r.Recv), r.OtherNS(), r.SoftirqNS(), r.TotalNS(), r.RecPerS(), sideNote(r)+r.Note)
			}
		}
	}
	if len(rows) > 0 {
		fmt.Println()
		printCostSummary(os.Stdout, rows, *md)
		fmt.Printf("load at the end %s\n", benchkit.LoadAvg())
	}
	switch {
	case interrupted:
		return interruptedf("%d rows measured", len(rows))
	case failed > 0:
		return failf("%d row(s) failed", failed)
	}
	return nil
}

// sideNote gives each thread's raw figures: CPU time, and idle polls
// at the cost of one.
func sideNote(r benchkit.CostRow) string {
	f := func(s benchkit.CostSide) string {
		return fmt.Sprintf("%.1f ms cpu, %.1f ms in %d idle of %d polls", float64(s.CPU)/1e6, float64(s.IdleCPU)/1e6, s.Idle, s.Iters)
	}
	out := "send: " + f(r.Send)
	if r.Name != "wal-alone" {
		out += "; recv: " + f(r.Recv)
	}
	return out + "; "
}

// busy is the share of the thread's CPU time that was work, percent.
func busy(s benchkit.CostSide) float64 {
	if s.CPU <= 0 {
		return 0
	}
	return 100 * s.Work() / float64(s.CPU)
}

// printCostSummary prints, per size and row in the order measured, the
// median and min–max over the runs of each figure, and what each row
// adds to the one before it (medians' difference).
func printCostSummary(w io.Writer, rows []benchkit.CostRow, md bool) {
	type key struct {
		size int
		name string
	}
	var order []key
	groups := map[key][]benchkit.CostRow{}
	for _, r := range rows {
		k := key{r.Size, r.Name}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].size < order[j].size })
	stat := func(rs []benchkit.CostRow, f func(benchkit.CostRow) float64) (med, lo, hi float64) {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2], v[0], v[len(v)-1]
	}
	cell := func(rs []benchkit.CostRow, f func(benchkit.CostRow) float64) string {
		m, lo, hi := stat(rs, f)
		if len(rs) == 1 {
			return fmt.Sprintf("%.1f", m)
		}
		return fmt.Sprintf("%.1f (%.1f–%.1f)", m, lo, hi)
	}
	head := []string{"size", "row", "runs", "send ns/rec", "Δ send", "recv ns/rec", "Δ recv", "other ns/rec", "total ns/rec", "softirq ns/rec", "busy send/recv", "rec/s"}
	var out [][]string
	var prev []benchkit.CostRow
	prevSize := 0
	for _, k := range order {
		rs := groups[k]
		if k.size != prevSize {
			prev, prevSize = nil, k.size
		}
		dSend, dRecv := "-", "-"
		if prev != nil && k.name != "wal-alone" {
			ms, _, _ := stat(rs, benchkit.CostRow.SendNS)
			ps, _, _ := stat(prev, benchkit.CostRow.SendNS)
			mr, _, _ := stat(rs, benchkit.CostRow.RecvNS)
			pr, _, _ := stat(prev, benchkit.CostRow.RecvNS)
			dSend, dRecv = fmt.Sprintf("%+.1f", ms-ps), fmt.Sprintf("%+.1f", mr-pr)
		}
		bs, _, _ := stat(rs, func(r benchkit.CostRow) float64 { return busy(r.Send) })
		br, _, _ := stat(rs, func(r benchkit.CostRow) float64 { return busy(r.Recv) })
		rps, _, _ := stat(rs, benchkit.CostRow.RecPerS)
		recv := cell(rs, benchkit.CostRow.RecvNS)
		busyCell := fmt.Sprintf("%.0f%% / %.0f%%", bs, br)
		if k.name == "wal-alone" {
			recv, dRecv, busyCell = "-", "-", fmt.Sprintf("%.0f%% / -", bs)
		}
		out = append(out, []string{strconv.Itoa(k.size), k.name, strconv.Itoa(len(rs)),
			cell(rs, benchkit.CostRow.SendNS), dSend, recv, dRecv, cell(rs, benchkit.CostRow.OtherNS),
			cell(rs, benchkit.CostRow.TotalNS), cell(rs, benchkit.CostRow.SoftirqNS), busyCell, fmt.Sprintf("%.2f M", rps/1e6)})
		if k.name != "wal-alone" && k.name != "floor+frame" {
			prev = rs // floor+frame is a bound beside the stack, not a layer of it
		}
	}
	benchkit.Table(w, md, head, out)
}
