package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "demo", summary: "sender and receiver in one process on loopback, with loss; the README's first command", run: runDemo})
}

func runDemo(args []string) error {
	fs := newFlagSet("demo", "[flags]", "Run a casting sender and receiver in one process over loopback: -n records at\n-rate per second, each appended to a WAL first, -drop percent of the datagrams\nlost at the receiver and repaired by NAKs (from the hot ring, or from the WAL on\ndisk). The producer runs inside the sender's loop and the consumer inside the\nreceiver's, plus the WAL's I/O goroutine. A spinning loop holds a CPU, and a\nthread waiting for a spinning thread's CPU waits milliseconds, so -idle auto\npicks by the CPUs this process may use: with 3 or more each loop spins on a\nthread of its own; with 2 both loops take turns on one shared spinning thread\n(cast.SharedThread), leaving the other CPU to the WAL's I/O and the runtime;\nwith 1 both park on their sockets. The summary says which layout ran and how\nmany threads were busy on how many CPUs.\nThen a short ping-pong measures the round trip. Prints a progress line (on a\nterminal, redrawn in place; otherwise a plain line every 5 s) and a summary.")
	n := fs.Int("n", 1_000_000, "records")
	size := fs.Int("size", 128, "payload bytes per record (frame = size + 16)")
	rate := fs.Float64("rate", 100_000, "records per second (0: as fast as the path takes them)")
	dropPct := fs.Float64("drop", 1, "percent of datagrams lost at the receiver")
	walDir := fs.String("wal", "", "WAL directory (default: a temporary one, removed afterwards; \"off\": no WAL)")
	pings := fs.Int("pings", 20000, "round trips measured after the stream (0: skip)")
	pin := fs.String("pin", "none", "CPUs of the sender and receiver loops (e.g. 0,1), or none: pinning is for an otherwise idle machine")
	path := fs.String("path", "mmsg", "datapath of the stream: mmsg or udp")
	idle := fs.String("idle", "auto", "how the loops run: spin (a thread each, holding a CPU each), park (a thread each, blocking on the socket), mixed (the sender's spins, the receiver's parks), shared (both on one spinning thread, pinned to -pin's first CPU), or auto (by the CPUs this process may use)")
	quiet := fs.Bool("q", false, "no progress line")
	keyFile := fs.String("key-file", "", "authenticate every datagram of the stream with the keys in FILE (docs/auth.md)")
	reorder := fs.Int("reorder", protocol.DefaultReorderSlots, "receiver reorder window, records (power of two); flow control keeps the sender within it")
	debounce := fs.Duration("debounce", protocol.DefaultNakDebounce, "longest time between two NAKs of the same gap (the re-NAK delay follows the RTT below it)")
	limit := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var keys *cast.Keys
	if *keyFile != "" {
		k, err := cast.LoadKeyFile(*keyFile)
		if err != nil {
			return usagef("-key-file: %v", err)
		}
		keys = k
	}
	if err := checkRange("n", *n, 1, 1<<40); err != nil {
		return err
	}
	if err := checkRange("size", *size, 16, protocol.DefaultMaxFrame-wire.HeaderSize); err != nil {
		return err
	}
	if err := checkRange("rate", *rate, 0, 1e9); err != nil {
		return err
	}
	if err := checkPct("drop", *dropPct); err != nil {
		return err
	}
	if err := checkRange("pings", *pings, 0, 1<<30); err != nil {
		return err
	}
	if *reorder < 1 || *reorder&(*reorder-1) != 0 || *reorder > 1<<24 {
		return usagef("-reorder %d: want a power of two 1..%d", *reorder, 1<<24)
	}
	if err := checkRange("timeout", *limit, time.Millisecond, 24*time.Hour); err != nil {
		return err
	}
	if *path != "mmsg" && *path != "udp" {
		return usagef("-path %q: want mmsg or udp", *path)
	}
	switch *idle {
	case "auto", "spin", "park", "mixed", "shared":
	default:
		return usagef("-idle %q: want auto, spin, park, mixed or shared", *idle)
	}
	if f := os.Getenv("WALCAST_CPUPROFILE"); f != "" {
		pf, err := os.Create(f)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cpus, err := parsePins(*pin)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()

	// The stream's two ends, connected to each other on loopback.
	var a, b datapath.Path
	switch *path {
	case "mmsg":
		pa, pb, err := benchkit.ConnectedMmsg(true, true, 64)
		if err != nil {
			return err
		}
		a, b = pa, pb
	case "udp":
		pa, pb, err := benchkit.ConnectedUDP()
		if err != nil {
			return err
		}
		a, b = pa, pb
	default:
		return fmt.Errorf("-path %q: want mmsg or udp", *path)
	}
	var lossy *drop.Path
	if *dropPct > 0 {
		lossy = drop.New(b, drop.Config{RecvPct: *dropPct, Seed: uint64(time.Now().UnixNano())}, 64, protocol.DefaultMaxFrame)
		b = lossy
	}

	walNote, dir := "off", ""
	if *walDir != "off" {
		if dir = *walDir; dir == "" {
			if dir, err = os.MkdirTemp("", "walcast-demo-"); err != nil {
				return err
			}
			defer os.RemoveAll(dir)
		}
		walNote = dir
	}

	frame := *size + wire.HeaderSize
	// Defaults throughout: the receiver's Status keeps the sender within
	// its reorder window, and the re-NAK delay follows the RTT.
	rc := cast.ReceiverTuning{MaxFrame: (frame + 63) &^ 63, ReorderSlots: *reorder, NakDebounce: *debounce}
	if *debounce == 0 {
		rc.NakDebounce = -1 // every pump (a zero field would mean the default)
	}

	// The consumer: the receiver on its pinned loop, repairs over UDP only
	// (no TCP catch-up: the demo shows what NAKs repair). The callback
	// runs on the consumer's loop thread.
	var delivered, outOfOrder atomic.Int64
	lat := benchkit.NewSamples(*n)
	var next uint64
	base := time.Now() // one clock origin for send stamps and deliveries
	var outcome atomic.Value
	ncpu := usableCPUs()
	lay := demoLayout(*idle, ncpu)
	var shared *cast.SharedThread
	if lay.shared {
		if shared, err = cast.NewSharedThread(affinity.OnCPU(cpus[0])); err != nil {
			return err
		}
		defer shared.Close()
	}
	// The progress line reads the counters the loops publish (what `cast
	// stat` shows) from the process's counters file, held to the end: the
	// loops keep their slots (Counters.Keep) so the last line has their
	// final values.
	ctr, _ := counters.Acquire(counters.Config{})
	defer ctr.Release()
	sndIdle, rcvIdle := affinity.Idler{Strategy: lay.snd}, affinity.Idler{Strategy: lay.rcv}
	cons, err := cast.NewConsumer(cast.ConsumerConfig{Path: b, NoCatchUp: true, Thread: affinity.OnCPU(cpus[1]), Idle: rcvIdle, Keys: keys,
		Advanced: cast.ConsumerAdvanced{Receiver: rc, RaiseGOMAXPROCS: true, Shared: shared, Counters: cast.Counters{Keep: true}},
		OnEvent: func(e cast.Event) {
			switch e.Kind {
			case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted:
				outcome.Store(e.Outcome)
			}
		}})
	if err != nil {
		a.Close()
		b.Close()
		return err
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runDone := make(chan error, 1)
	go func() {
		runDone <- cons.Run(runCtx, func(r cast.Record) error {
			if next != 0 && r.Seq != next {
				outOfOrder.Add(1)
			}
			next = r.Seq + 1
			if d := int64(time.Since(base)) - int64(binary.LittleEndian.Uint64(r.Payload[8:])); d > 0 {
				lat.Record(d)
			}
			delivered.Add(1)
			return nil
		})
	}()

	// The producer: WAL, sender and its pinned loop, which produces the
	// records itself, paced (the stamp in bytes 8..15 is the send time).
	var sent atomic.Int64
	done := make(chan struct{})
	prod := producer(sendOpts{n: *n, payload: *size, rate: *rate}, &sent, done)
	fmt.Printf("walcast demo: %d records of %d B over %s on loopback, %.1f%% loss at the receiver, WAL %s\n", *n, frame, features(a), *dropPct, walNote)
	fmt.Printf("layout         %s, pins %s; -idle %s on %d CPUs: %s\n", lay, pinNote(cpus), *idle, ncpu, lay.why)
	threads0, _ := benchkit.ThreadTimes()
	start := time.Now()
	pr, err := cast.NewProducer(cast.ProducerConfig{Path: a, Dir: dir, Thread: affinity.OnCPU(cpus[0]), Idle: sndIdle, Keys: keys, Advanced: cast.ProducerAdvanced{RaiseGOMAXPROCS: true, Shared: shared, Counters: cast.Counters{Keep: true},
		OnPoll: func(l *cast.Loop, _ int64) { prod(l, int64(time.Since(base))) }}})
	if err != nil {
		stopRun()
		<-runDone
		return err
	}

	prog := newProgress(os.Stderr, *quiet)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var interrupted, timedOut bool
	var runErr error
	finished, ran := false, false
	giveUp := time.After(*limit)
	for !finished {
		select {
		case <-ctx.Done():
			interrupted, finished = true, true
		case <-giveUp:
			timedOut, finished = true, true
		case runErr = <-runDone:
			ran, finished = true, true
		case <-tick.C:
			prog.update(demoStatus(ctr, int64(*n), time.Since(start), lossy), false)
			if delivered.Load() >= int64(*n) || pr.Err() != nil {
				finished = true
			}
		}
	}
	el := time.Since(start)
	threads1, _ := benchkit.ThreadTimes()
	prog.update(demoStatus(ctr, int64(*n), el, lossy), true)
	prog.done()
	perr := pr.Close()
	stopRun()
	if !ran {
		runErr = <-runDone
	}
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	if _, isOutcome := outcome.Load().(protocol.Outcome); perr != nil || (runErr != nil && !isOutcome) {
		return fmt.Errorf("closing: %v %v", perr, runErr)
	}
	ps, cs := pr.Stats(), cons.Stats()
	ss, rs := ps.Sender, cs.Receiver
	d := delivered.Load()
	var dropped uint64
	if lossy != nil {
		dropped, _ = lossy.Dropped()
	}
	order := "in order, each once"
	if outOfOrder.Load() > 0 {
		order = fmt.Sprintf("%d OUT OF ORDER", outOfOrder.Load())
	}
	fmt.Printf("delivered      %d / %d records, %s\n", d, *n, order)
	fmt.Printf("loss injected  %d datagrams dropped at the receiver\n", dropped)
	fmt.Printf("gaps recovered %d NAKs for %d records; duplicates discarded %d\n", rs.NaksSent, rs.NakSeqs, rs.Duplicates)
	fmt.Printf("retransmits    %d (hot ring %d, WAL %d)\n", ss.RetxHot+ss.RetxCold, ss.RetxHot, ss.RetxCold)
	if ss.ColdQueued+ss.ColdRejected+ss.ColdOverBudget > 0 {
		ls := ps.Loop
		fmt.Printf("cold reads     %d queued, %d served, %d seqs rejected (queue full), %d over budget, %d missing, %d failed\n", ss.ColdQueued, ls.ColdReads, ss.ColdRejected, ss.ColdOverBudget, ss.ColdMissing, ss.ColdErrors+ls.ColdErrors)
	}
	fmt.Printf("throughput     %.0f records/s, %.3f Gbit/s (%.2f s)\n", float64(d)/el.Seconds(), float64(d)*float64(frame)*8/el.Seconds()/1e9, el.Seconds())
	if threads0 != nil && threads1 != nil {
		busy, all, total := busyThreads(benchkit.ThreadDelta(threads0, threads1), el)
		fmt.Printf("threads        %d busy (≥ %d%% of a CPU each) of %d that ran, %.2f CPUs used in all, on %d CPUs\n", busy, busyPct, all, total, ncpu)
	}
	if ls := lat.Summarize(); ls.N > 0 {
		fmt.Printf("send→deliver   p50 %.1f µs  p99 %.1f µs  p99.9 %.1f µs  (one way, loss repairs included)\n", us(ls.P50), us(ls.P99), us(ls.P999))
	}
	if dir != "" {
		fmt.Printf("wal            durable through seq %d\n", ps.Durable)
	}
	if o, ok := outcome.Load().(protocol.Outcome); ok {
		return outcomef("receiver stopped: %s (%d of %d records delivered)", strings.TrimPrefix(o.Err().Error(), "cast: "), d, *n)
	}
	if interrupted {
		return interruptedf("%d of %d records delivered", d, *n)
	}
	if timedOut {
		return failf("gave up after %v with %d of %d records delivered", *limit, d, *n)
	}
	if *pings > 0 {
		c := benchkit.DefaultRTTConfig()
		c.N, c.Warmup, c.CPUs = *pings, min(*pings/10, 2000), cpus
		r, err := benchkit.RTTCasting(c)
		if err != nil {
			return fmt.Errorf("ping-pong: %w", err)
		}
		l := r.Latency
		fmt.Printf("RTT            p50 %.1f µs  p99 %.1f µs  p99.9 %.1f µs  (%d pings of %d B, casting over udp, two spinning loops, pins %s)\n", us(l.P50), us(l.P99), us(l.P999), l.N, c.Size, pinNote(cpus))
	}
	return nil
}

// demoLoops is how the demo's two loops run, and why: shared (both on
// one spinning thread, in turn), or each on its own thread doing snd/rcv
// when idle.
type demoLoops struct {
	shared   bool
	snd, rcv affinity.Strategy
	why      string
}

func (d demoLoops) String() string {
	if d.shared {
		return "sender and receiver loops on one shared spinning thread"
	}
	return fmt.Sprintf("sender loop %s, receiver loop %s", d.snd, d.rcv)
}

// demoLayout picks how the loops run. A spinning loop holds a CPU for
// good; the WAL's I/O goroutine, the runtime and the progress line need
// CPU time too, and a thread that waits for a spinning thread's CPU
// waits for the scheduler's slice: milliseconds, which the records then
// wait. So auto spins a thread per loop only when each gets a CPU of its
// own and one more is left (for the WAL's I/O, the runtime and the rest);
// with two CPUs both loops take turns on one spinning thread (on
// loopback a datagram one sends is in the other's socket when the send
// returns) and the other CPU is left free; with one, both park on their
// sockets (a parked loop runs when a datagram or its 1 ms tick wakes it).
func demoLayout(idle string, ncpu int) demoLoops {
	spin, park := affinity.Spin, affinity.Park
	switch idle {
	case "spin":
		return demoLoops{false, spin, spin, "as asked"}
	case "park":
		return demoLoops{false, park, park, "as asked"}
	case "mixed":
		return demoLoops{false, spin, park, "as asked"}
	case "shared":
		return demoLoops{true, spin, spin, "as asked"}
	}
	switch {
	case ncpu >= 3:
		return demoLoops{false, spin, spin, "a CPU for each spinning loop and one for the rest (the WAL's I/O, the runtime)"}
	case ncpu == 2:
		return demoLoops{true, spin, spin, "one CPU for the shared thread, one for the rest (the WAL's I/O, the runtime)"}
	}
	return demoLoops{false, park, park, "one CPU: no thread may spin"}
}

// usableCPUs is the number of CPUs this process may run on.
func usableCPUs() int {
	if c, err := affinity.CurrentCPUs(); err == nil && len(c) > 0 {
		return len(c)
	}
	return runtime.NumCPU()
}

func pinNote(cpus [2]int) string {
	if cpus[0] < 0 && cpus[1] < 0 {
		return "none"
	}
	return fmt.Sprintf("%d,%d", cpus[0], cpus[1])
}

// busyPct is the share of one CPU above which the summary counts a
// thread as busy.
const busyPct = 5

// busyThreads counts the threads that ran at least busyPct of el, the
// threads that ran at all, and the CPUs the process used on average.
func busyThreads(ts []benchkit.ThreadCPU, el time.Duration) (busy, all int, cpus float64) {
	for _, t := range ts {
		all++
		cpus += float64(t.NS) / float64(el)
		if float64(t.NS) >= float64(el)*busyPct/100 {
			busy++
		}
	}
	return busy, all, cpus
}

// demoStatus is the progress line: the consumer's records delivered and
// NAKs sent from the process's counters (f nil: counters are off), the
// datagrams the loss injector dropped.
func demoStatus(f *counters.File, n int64, el time.Duration, lossy *drop.Path) string {
	if f == nil {
		return fmt.Sprintf("%.1f s (counters off: WALCAST_COUNTERS=off)", el.Seconds())
	}
	s := f.Snapshot()
	d := int64(valueOf(s, "records_delivered", "consumer"))
	const width = 30
	frac := float64(d) / float64(max(n, 1))
	bar := strings.Repeat("=", int(frac*width))
	if len(bar) < width {
		bar += ">" + strings.Repeat(" ", width-len(bar)-1)
	}
	var dropped uint64
	if lossy != nil {
		dropped, _ = lossy.Dropped()
	}
	return fmt.Sprintf("[%s] %3.0f%% %d/%d  %.0fk rec/s  lost %d  NAKs %d", bar[:width], 100*frac, d, n, float64(d)/max(el.Seconds(), 1e-9)/1e3, dropped,
		valueOf(s, "naks_sent", "consumer"))
}
