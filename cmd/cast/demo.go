package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "demo", summary: "sender and receiver in one process on loopback, with loss; the README's first command", run: runDemo})
}

func runDemo(args []string) error {
	fs := newFlagSet("demo", "[flags]", "Run a casting sender and receiver in one process over loopback: -n records at\n-rate per second, each appended to a WAL first, -drop percent of the datagrams\nlost at the receiver and repaired by NAKs (from the hot ring, or from the WAL on\ndisk). Then a short ping-pong measures the round trip. Prints a progress line\n(on a terminal, redrawn in place; otherwise a plain line every 5 s) and a summary.")
	n := fs.Int("n", 1_000_000, "records")
	size := fs.Int("size", 128, "payload bytes per record (frame = size + 16)")
	rate := fs.Float64("rate", 100_000, "records per second (0: as fast as the path takes them)")
	dropPct := fs.Float64("drop", 1, "percent of datagrams lost at the receiver")
	walDir := fs.String("wal", "", "WAL directory (default: a temporary one, removed afterwards; \"off\": no WAL)")
	pings := fs.Int("pings", 20000, "round trips measured after the stream (0: skip)")
	pin := fs.String("pin", "none", "CPUs of the sender and receiver loops (e.g. 0,1), or none: pinning is for an otherwise idle machine")
	path := fs.String("path", "mmsg", "datapath of the stream: mmsg or udp")
	quiet := fs.Bool("q", false, "no progress line")
	reorder := fs.Int("reorder", protocol.DefaultReorderSlots, "receiver reorder window, records (power of two); flow control keeps the sender within it")
	debounce := fs.Duration("debounce", time.Duration(protocol.DefaultNakDebounce), "longest time between two NAKs of the same gap (the re-NAK delay follows the RTT below it)")
	limit := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
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
	rc := protocol.ReceiverConfig{MaxFrame: (frame + 63) &^ 63, ReorderSlots: *reorder, NakDebounce: int64(*debounce)}
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
	cons, err := cast.NewConsumer(cast.ConsumerConfig{Path: b, NoCatchUp: true, Receiver: rc, Thread: affinity.OnCPU(cpus[1]),
		OnEvent: func(e cast.Event) {
			if e.Kind == cast.EventEscalated {
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
	start := time.Now()
	pr, err := cast.NewProducer(cast.ProducerConfig{Path: a, Dir: dir, Thread: affinity.OnCPU(cpus[0]),
		OnPoll: func(l *cast.Loop, _ int64) { prod(l, int64(time.Since(base))) }})
	if err != nil {
		stopRun()
		<-runDone
		return err
	}

	// Progress from counters the loops publish, polled 10 times a second.
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
			d := delivered.Load()
			prog.update(demoStatus(d, int64(*n), time.Since(start), cons.Stats().Receiver, lossy), false)
			if d >= int64(*n) || pr.Err() != nil {
				finished = true
			}
		}
	}
	el := time.Since(start)
	prog.update(demoStatus(delivered.Load(), int64(*n), el, cons.Stats().Receiver, lossy), true)
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
		fmt.Printf("RTT            p50 %.1f µs  p99 %.1f µs  p99.9 %.1f µs  (%d pings of %d B, casting over udp, pinned busy-poll)\n", us(l.P50), us(l.P99), us(l.P999), l.N, c.Size)
	}
	return nil
}

// demoStatus is the progress line: a bar, the count, the rate and the repairs.
func demoStatus(d, n int64, el time.Duration, rs protocol.ReceiverStats, lossy *drop.Path) string {
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
	return fmt.Sprintf("[%s] %3.0f%% %d/%d  %.0fk rec/s  lost %d  NAKs %d", bar[:width], 100*frac, d, n, float64(d)/max(el.Seconds(), 1e-9)/1e3, dropped, rs.NaksSent)
}
