package harness

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/internal/benchkit"
	"golang.org/x/sys/unix"
)

// Config is one run's shape. Every peer in a workload gets the same one.
type Config struct {
	Payload   int           // message bytes for latency workloads (128)
	Warmup    int           // messages before measuring (2 000)
	N         int           // measured messages (20 000)
	ClientCPU int           // core of A's loop (0); -1 leaves it unpinned
	ServerCPU int           // core of B's loop (1); -1 leaves it unpinned
	Budget    time.Duration // wall-time cap of one measured phase (2 s)
	Timeout   time.Duration // watchdog: the pair is closed after this (30 s)
	// Drain is how long Throughput waits after the last send for a
	// reliable peer to finish repairing; 0 means Budget.
	Drain time.Duration
	// Progress receives a one-line status for runs longer than 2 s;
	// nil prints nothing.
	Progress io.Writer `json:"-"`
	// Net, when set, is where Throughput opens its pairs (peers.Config.Net):
	// a link whose kernel loss injector the caller has set to the row's
	// drop, so the peers get no user-space drop. The injector matches
	// UDP only: a TCP peer's row at drop > 0 is skipped and says so.
	Net *peers.Net `json:"-"`
}

// DefaultConfig is the suite's default shape.
func DefaultConfig() Config {
	return Config{Payload: 128, Warmup: 2000, N: 20000, ClientCPU: 0, ServerCPU: 1, Budget: 2 * time.Second, Timeout: 30 * time.Second}
}

// Validate checks the ranges.
func (c Config) Validate() error {
	switch {
	case c.Payload < 16 || c.Payload > 60000:
		return fmt.Errorf("harness: payload %d out of 16..60000", c.Payload)
	case c.N < 1 || c.Warmup < 0:
		return fmt.Errorf("harness: n %d, warmup %d", c.N, c.Warmup)
	case c.Budget <= 0 || c.Timeout <= 0:
		return fmt.Errorf("harness: budget %v, timeout %v", c.Budget, c.Timeout)
	}
	return nil
}

// DrainTime is Drain or its default.
func (c Config) DrainTime() time.Duration {
	if c.Drain > 0 {
		return c.Drain
	}
	return c.Budget
}

// Point is one point of a latency percentile spectrum.
type Point struct {
	Q  float64 `json:"q"`  // percentile, 0..100
	NS int64   `json:"ns"` // latency at Q
}

// Result is one row with what the plots and report need besides it.
type Result struct {
	benchkit.Row
	Size         int     `json:"size,omitempty"` // message bytes
	Drop         float64 `json:"drop,omitempty"` // injected loss per direction, 0..1
	Sent         int64   `json:"sent,omitempty"`
	Delivered    int64   `json:"delivered,omitempty"` // delivered in order
	DeliveredPct float64 `json:"delivered_pct,omitempty"`
	Lost         int64   `json:"lost,omitempty"` // round trips that timed out
	// OverUDPPct is the share (0..100) of the delivered records that
	// arrived over UDP (loss-degradation): casting's Consumer counts
	// records delivered live over UDP against those fetched by TCP
	// catch-up; a peer with no TCP path has 100 by construction, a TCP
	// peer 0. Nil: not measured (nothing delivered, or an older run).
	OverUDPPct    *float64             `json:"over_udp_pct,omitempty"`
	RetransPerRec float64              `json:"retrans_per_rec,omitempty"`
	Perf          []benchkit.PerfCount `json:"perf,omitempty"`
	Curve         []Point              `json:"curve,omitempty"`
	Series        []int64              `json:"series,omitempty"` // per-message latency in order (ns), for scatter plots (saved for classic-rtt only)
	Skipped       string               `json:"skipped,omitempty"`
	Pinned        bool                 `json:"pinned"`
}

// Quantiles of the percentile spectrum in Result.Curve.
var Quantiles = []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999}

// Hist is an HDR histogram of ns values, 1 ns to 60 s, 3 significant
// digits. Record clamps, so it never allocates (an out-of-range value
// would make hdrhistogram build an error).
type Hist struct{ h *hdr.Histogram }

// NewHist allocates a histogram (about 200 KB).
func NewHist() *Hist { return &Hist{h: hdr.New(1, int64(60*time.Second), 3)} }

// Record adds one value in ns.
func (h *Hist) Record(ns int64) {
	h.h.RecordValue(min(max(ns, 1), int64(60*time.Second)))
}

// Summary is the distribution in benchkit's form.
func (h *Hist) Summary() benchkit.Summary {
	if h.h.TotalCount() == 0 {
		return benchkit.Summary{}
	}
	return benchkit.Summary{
		N: int(h.h.TotalCount()), Min: h.h.Min(), Max: h.h.Max(),
		P50: h.h.ValueAtQuantile(50), P90: h.h.ValueAtQuantile(90), P99: h.h.ValueAtQuantile(99),
		P999: h.h.ValueAtQuantile(99.9), Mean: h.h.Mean(), StdDev: h.h.StdDev(),
	}
}

// Curve is the percentile spectrum at Quantiles.
func (h *Hist) Curve() []Point {
	if h.h.TotalCount() == 0 {
		return nil
	}
	out := make([]Point, len(Quantiles))
	for i, q := range Quantiles {
		out[i] = Point{Q: q, NS: h.h.ValueAtQuantile(q)}
	}
	return out
}

// Pin locks the calling goroutine to its OS thread and, for cpu ≥ 0,
// binds that thread to cpu. The thread stays locked: when the goroutine
// exits the runtime discards it, so the affinity never leaks.
func Pin(cpu int) error {
	runtime.LockOSThread()
	if cpu < 0 {
		return nil
	}
	var s unix.CPUSet
	s.Set(cpu)
	if err := unix.SchedSetaffinity(0, &s); err != nil {
		return fmt.Errorf("harness: pin to cpu %d: %w", cpu, err)
	}
	return nil
}

// stamp writes seq and a send time into a message's first 16 bytes.
func stamp(p []byte, seq uint64, ns int64) {
	binary.LittleEndian.PutUint64(p, seq)
	binary.LittleEndian.PutUint64(p[8:], uint64(ns))
}

func unstamp(p []byte) (seq uint64, ns int64) {
	return binary.LittleEndian.Uint64(p), int64(binary.LittleEndian.Uint64(p[8:]))
}

// progress redraws "label done/total" every 250 ms once a run has taken
// 2 s, on a terminal only: in a log (a pipe, a file) the suite's line per
// finished row is the progress, and carriage returns would be noise.
func progress(w io.Writer, label string, total int64, done *atomic.Int64) (stop func()) {
	if f, ok := w.(*os.File); !ok || !isTerminal(f) {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		printed := false
		for {
			select {
			case <-quit:
				if printed {
					fmt.Fprintf(w, "\r%-60s\r", "")
				}
				return
			case <-t.C:
				if time.Since(start) < 2*time.Second {
					continue
				}
				printed = true
				fmt.Fprintf(w, "\r%-28s %8d/%-8d %5.1fs", label, done.Load(), total, time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// session is one opened pair with its watchdog.
type session struct {
	pair     *peers.Pair
	closed   sync.Once
	watchdog *time.Timer
}

func openSession(p peers.Peer, pc peers.Config, timeout time.Duration) (*session, error) {
	if p.Skip != "" {
		return nil, errors.New(p.Skip)
	}
	pair, err := p.Open(pc)
	if err != nil {
		return nil, err
	}
	s := &session{pair: pair}
	s.watchdog = time.AfterFunc(timeout, s.close)
	return s, nil
}

func (s *session) close() {
	s.closed.Do(func() { s.pair.Close() })
}

// finish closes the pair after both loops returned and frees it.
func (s *session) finish() {
	s.watchdog.Stop()
	s.close()
	if s.pair.Release != nil {
		s.pair.Release()
	}
}

func (s *session) retransmits() int64 {
	if s.pair.Stats == nil {
		return 0
	}
	return s.pair.Stats.Retransmits()
}

// finite replaces NaN/Inf (JSON cannot carry them) with 0.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
