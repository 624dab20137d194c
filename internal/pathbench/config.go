// Package pathbench runs the same casting workloads over each of
// walcast's kernel paths, side by side, between network namespaces it
// creates and removes itself: kernel UDP (udp), batched UDP (mmsg, with and
// without GSO/GRO) and AF_XDP (xdp, copy mode, with and without busy
// polling, native and generic attach). `cast bench paths` prints its
// report, and the bench suite's "paths" workload puts its rows into the
// suite's report and plots.
//
// Workloads, each for every spec and repeated Runs times, interleaved
// (spec A B C, A B C, ...) so slow drift of a shared machine hits every
// path alike:
//
//   - rtt: a casting ping-pong over a veth pair (client loop on CPU A, echo
//     loop on CPU B): RTT percentiles, and per round trip the loop threads'
//     CPU time, system calls (counted in the kernel by a BPF program on
//     sys_enter), context switches (voluntary and not) and run-queue wait;
//   - throughput: one-way records/s in order at each size, the sender kept
//     at most Window records ahead of delivery;
//   - loss: a paced stream over a LAN (hosts on a bridge) whose switch
//     ports drop the same fraction of datagrams in both directions with the
//     tc injector (bpf.TCImpair): delivery latency percentiles, what the
//     protocol repaired, and the loss actually injected per direction.
//
// It needs Linux and root (namespaces, BPF, AF_XDP). A mode the kernel
// refuses is reported with the reason, not measured.
package pathbench

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/walcast/walcast/internal/benchkit"
)

// Workloads in the order Run runs them.
var Workloads = []string{"rtt", "throughput", "loss"}

// Config is one invocation.
type Config struct {
	Specs     []Spec
	Workloads []string // from Workloads
	Runs      int      // each workload × spec, interleaved (3)
	N         int      // measured round trips per rtt row (20 000)
	Warmup    int      // round trips before measuring, spread over the blocks (2 000)
	Blocks    int      // rtt: each run's round trips in this many blocks, interleaved across specs (10)
	Size      int      // record bytes (walcast header included) of rtt and loss (144)
	Sizes     []int    // record bytes of throughput rows (144, 1443)
	TputTime  time.Duration
	Window    int           // records in flight at most, throughput (4096)
	Loss      float64       // injected loss per direction, loss rows (0.01)
	LossRate  int           // records/s of the loss stream (20 000)
	LossTime  time.Duration // sending time of a loss row (2 s)
	CPUs      [2]int        // cores of the A (client/sender) and B (echo/receiver) loops; -1 unpinned
	// Stall is how long a loss row may go without a delivery before it
	// ends incomplete (0: 5 s); with Tolerate, the receivers' NAK-retry
	// and silence budgets are stretched to Stall too (tests on a loaded
	// machine, where a loop can be off-CPU for seconds; the bench measures
	// the protocol's defaults).
	Stall    time.Duration
	Tolerate bool
	Tag      string    // goes into namespace names
	Log      io.Writer // progress lines; nil: silent
}

// DefaultConfig is what `cast bench paths` runs without flags.
func DefaultConfig() Config {
	return Config{
		Workloads: Workloads, Runs: 3, N: 20000, Warmup: 2000, Blocks: 10, Size: 144, Sizes: []int{144, 1443},
		TputTime: 2 * time.Second, Window: 4096, Loss: 0.01, LossRate: 20000, LossTime: 2 * time.Second,
		CPUs: [2]int{0, 1}, Tag: "paths",
	}
}

// Validate reports a configuration Run refuses.
func (c Config) Validate() error {
	for _, w := range c.Workloads {
		ok := false
		for _, k := range Workloads {
			ok = ok || w == k
		}
		if !ok {
			return fmt.Errorf("pathbench: unknown workload %q (have rtt, throughput, loss)", w)
		}
	}
	switch {
	case len(c.Specs) == 0:
		return errors.New("pathbench: no paths")
	case len(c.Workloads) == 0:
		return errors.New("pathbench: no workloads")
	case c.Runs < 1 || c.Runs > 100:
		return fmt.Errorf("pathbench: runs %d outside 1..100", c.Runs)
	case c.N < 1 || c.Warmup < 0 || c.Blocks < 1 || c.Blocks > c.N:
		return fmt.Errorf("pathbench: n %d, warmup %d, blocks %d (want 1..n)", c.N, c.Warmup, c.Blocks)
	case c.Size < minRecord || c.Size > maxRecord:
		return fmt.Errorf("pathbench: size %d outside %d..%d", c.Size, minRecord, maxRecord)
	case c.TputTime <= 0 || c.LossTime <= 0 || c.Stall < 0:
		return fmt.Errorf("pathbench: durations must be > 0")
	case c.Window < 1:
		return fmt.Errorf("pathbench: window %d < 1", c.Window)
	case c.Loss < 0 || c.Loss >= 1 || c.Loss != c.Loss:
		return fmt.Errorf("pathbench: loss %v outside [0, 1)", c.Loss)
	case c.LossRate < 1 || c.LossRate > 1_000_000:
		return fmt.Errorf("pathbench: loss rate %d outside 1..1000000 records/s", c.LossRate)
	}
	for _, s := range c.Sizes {
		if s < minRecord || s > maxRecord {
			return fmt.Errorf("pathbench: throughput size %d outside %d..%d", s, minRecord, maxRecord)
		}
	}
	return nil
}

// stall is c.Stall or its default.
func (c Config) stall() time.Duration {
	if c.Stall > 0 {
		return c.Stall
	}
	return 5 * time.Second
}

// HardwareEvents are the perf events of a Thread that count on the CPU's
// PMU (the others are the kernel's software events).
var HardwareEvents = map[string]bool{"cycles": true, "instructions": true, "cache-misses": true, "branch-misses": true}

// Record sizes: the walcast header plus a 24-byte payload (seq, index,
// send time) at least; one IPv4 datagram on a 1500-byte MTU at most.
const (
	minRecord = 16 + 24
	maxRecord = 1472
)

// Thread is what one loop thread spent per operation (round trip, or
// record) in the measured phase. A counter the kernel refused is -1.
type Thread struct {
	CPUNs       float64              `json:"cpu_ns"`         // task clock (perf software event)
	SysPct      float64              `json:"sys_pct"`        // share of it in the kernel (/proc stat ticks)
	Syscalls    float64              `json:"syscalls"`       // counted by the BPF sys_enter program
	CtxSw       float64              `json:"ctxsw"`          // context switches (perf software event)
	Involuntary float64              `json:"involuntary"`    // of them, preemptions (/proc status)
	RunqNs      float64              `json:"runq_ns"`        // time runnable but not running (schedstat)
	Why         string               `json:"why,omitempty"`  // counters that were n/a, and why
	Perf        []benchkit.PerfCount `json:"perf,omitempty"` // the whole perf group per op: hardware events (n/a where the host hides its PMU) and software ones
}

// Row is one measured (or refused) spec under one workload and run.
type Row struct {
	benchkit.Row
	Spec         string  `json:"spec"`
	Run          int     `json:"run"`               // 1..Runs; 0 for a summary row
	Size         int     `json:"size"`              // record bytes
	Drop         float64 `json:"drop,omitempty"`    // configured loss per direction
	LossAB       float64 `json:"loss_ab,omitempty"` // injected loss measured A→B (fraction)
	LossBA       float64 `json:"loss_ba,omitempty"`
	MatchedAB    uint64  `json:"matched_ab,omitempty"` // datagrams the injectors saw
	MatchedBA    uint64  `json:"matched_ba,omitempty"`
	Sent         int64   `json:"sent,omitempty"`
	Delivered    int64   `json:"delivered,omitempty"` // in order
	DeliveredPct float64 `json:"delivered_pct,omitempty"`
	Retx         uint64  `json:"retx,omitempty"`
	Naks         uint64  `json:"naks,omitempty"`
	A            Thread  `json:"a"`                 // client / sender loop
	B            Thread  `json:"b"`                 // echo / receiver loop
	Refused      string  `json:"refused,omitempty"` // not measured: the kernel refused the mode
	Failed       string  `json:"failed,omitempty"`  // not measured: the run failed
	Spread       string  `json:"spread,omitempty"`  // summary rows: the range over runs
}

// Measured reports whether the row holds figures.
func (r Row) Measured() bool { return r.Refused == "" && r.Failed == "" }

// Report is one Run.
type Report struct {
	Date      string   `json:"date"`
	Machine   string   `json:"machine"`
	Command   string   `json:"command"`
	LoadStart string   `json:"load_start"` // /proc/loadavg 1/5/15 min
	LoadEnd   string   `json:"load_end"`
	Seconds   float64  `json:"seconds"`
	Rows      []Row    `json:"rows"`    // every run
	Summary   []Row    `json:"summary"` // per workload, spec and size: the median run, with Spread
	Notes     []string `json:"notes"`   // modes refused, inert options, counters n/a, checks
	Checks    []Check  `json:"checks"`
	began     time.Time
}

// Check is one comparison the issue asks for, made per run.
type Check struct {
	Text   string `json:"text"`
	Met    bool   `json:"met"`
	Detail string `json:"detail"`
}
