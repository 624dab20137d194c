package main

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/walcast/walcast/internal/pathbench"
)

func init() {
	registerBench("paths", "udp vs mmsg vs AF_XDP on veth, same protocol core: RTT, throughput, loss with the tc injector (root)", benchPaths)
}

const benchPathsAbout = `The same casting workloads over each kernel path, side by side, between
network namespaces this command creates and removes (named walcast-TAG-…):

  rtt         ping-pong of one record over a veth pair: p50/p99/p99.9, and per
              round trip the loop threads' CPU time, system calls (counted in
              the kernel by a BPF program), context switches and preemptions
  throughput  one-way records/s in order at each -sizes, at most -window
              records ahead of delivery
  loss        a -rate records/s stream over a LAN whose switch ports drop
              -loss % of datagrams in both directions (tc-BPF injector on
              egress, so AF_XDP senders are impaired too): delivery latency,
              retransmits, and the loss each path actually got

Paths (-paths, comma-separated; default all): udp, mmsg-b<N>[-gso],
xdp-<native|generic>[-b<N>][-rx<N>][-fill<N>][-busy|-busyalways][-nowakeup]
(-b batch, -rx receive frames, -fill how many stay posted while receiving
is light, -busy SO_BUSY_POLL where the socket has a
NAPI context, -busyalways a busy-poll recvfrom on every empty poll,
-nowakeup without XDP_USE_NEED_WAKEUP). A mode the kernel refuses is
reported with the reason. Every workload runs -runs times interleaved; the
tables show the median run and the min–max spread, the load average at the
start and the end, and the per-run check "xdp p99 ≤ udp p99, p50 below".
Needs root, ip(8) and ethtool(8). Run it under the bench lock:
  flock /tmp/walcast-bench.lock cast bench paths`

func benchPaths(args []string) error {
	fs := newFlagSet("bench paths", "[flags]", benchPathsAbout)
	c := pathbench.DefaultConfig()
	paths := fs.String("paths", "all", "paths to compare, comma-separated (see above)")
	workloads := fs.String("workloads", strings.Join(pathbench.Workloads, ","), "workloads to run, comma-separated")
	fs.IntVar(&c.Runs, "runs", c.Runs, "interleaved runs of every row")
	fs.IntVar(&c.N, "n", c.N, "measured round trips per rtt row")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "round trips before measuring (spread over the blocks)")
	fs.IntVar(&c.Blocks, "blocks", c.Blocks, "rtt: take each run's round trips in this many blocks, interleaved across paths")
	fs.IntVar(&c.Size, "size", c.Size, "record bytes (16-byte header included) of rtt and loss")
	sizes := fs.String("sizes", "144,1443", "record bytes of the throughput rows, comma-separated")
	fs.DurationVar(&c.TputTime, "time", c.TputTime, "measured time of one throughput row")
	fs.IntVar(&c.Window, "window", c.Window, "records in flight at most in throughput rows")
	lossPct := fs.Float64("loss", 100*c.Loss, "percent of datagrams dropped per direction in loss rows")
	fs.IntVar(&c.LossRate, "rate", c.LossRate, "records/s of the loss stream")
	fs.DurationVar(&c.LossTime, "loss-time", c.LossTime, "sending time of one loss row")
	pin := fs.String("pin", "0,1", "CPUs of the A (client, sender) and B (echo, receiver) loops, or none")
	fs.StringVar(&c.Tag, "tag", c.Tag, "name in the namespaces created (letters, digits, '-')")
	jsonOut := fs.Bool("json", false, "print the whole report (every run) as JSON instead of tables")
	md := fs.Bool("md", false, "print Markdown tables")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if c.Specs, err = pathbench.ParseSpecs(*paths); err != nil {
		return usagef("-paths: %v", err)
	}
	c.Workloads = strings.Split(*workloads, ",")
	if c.Sizes, err = parseSizes(*sizes); err != nil {
		return err
	}
	if err := checkPct("loss", *lossPct); err != nil {
		return err
	}
	c.Loss = *lossPct / 100
	if c.CPUs, err = parsePins(*pin); err != nil {
		return err
	}
	if !*quiet {
		c.Log = os.Stderr
	}
	if err := c.Validate(); err != nil {
		return usagef("%v", err)
	}
	ctx, stop := signalContext()
	defer stop()
	r, err := pathbench.Run(ctx, c)
	if r == nil {
		if errors.Is(err, pathbench.ErrNeedRoot) {
			return failf("%v", err)
		}
		return err
	}
	r.Command = "cast bench paths " + strings.Join(args, " ")
	if *jsonOut {
		if err := r.WriteJSON(os.Stdout); err != nil {
			return err
		}
	} else {
		r.Text(os.Stdout, *md)
	}
	if err != nil { // interrupted: what was measured is printed above
		return interruptedf("after %d rows", len(r.Rows))
	}
	var bad []string
	for _, x := range r.Summary {
		if x.Failed != "" {
			bad = append(bad, x.Workload+" "+x.Spec)
		}
	}
	if len(bad) > 0 {
		return failf("%d rows failed in every run: %s (see the notes above)", len(bad), strings.Join(bad, ", "))
	}
	return nil
}

// parseSizes reads -sizes: comma-separated record sizes.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, usagef("-sizes: %q: want comma-separated byte counts", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, usagef("-sizes is empty")
	}
	return out, nil
}

// parseFrameSizes reads -sizes as frame sizes: each must fit one
// datagram (24..1472 bytes).
func parseFrameSizes(s string) ([]int, error) {
	sz, err := parseSizes(s)
	if err != nil {
		return nil, err
	}
	for _, n := range sz {
		if err := checkRange("sizes", n, 24, 1472); err != nil {
			return nil, err
		}
	}
	return sz, nil
}
