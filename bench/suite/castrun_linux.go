package suite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/internal/pace"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wire"
)

// This file drives walcast itself for the workloads whose runner the
// datapath package does not export: cast.Sender/Receiver bound to
// datapath/udp or datapath/mmsg by cast.Loop on pinned threads, loss from
// datapath/drop, the WAL from wal.Writer. It only wires exported pieces
// together; the protocol is theirs.

// castPaths opens two connected datapaths of kind ("udp" or "mmsg") on
// loopback.
func castPaths(kind string) (a, b datapath.Path, err error) {
	switch kind {
	case "udp":
		return benchkit.ConnectedUDP()
	case "mmsg":
		return benchkit.ConnectedMmsg(true, true, 64)
	}
	return nil, nil, fmt.Errorf("suite: unknown datapath %q", kind)
}

// castStream is one sender → receiver run.
type castStream struct {
	Path     string        // udp or mmsg
	Payload  int           // bytes
	Rate     float64       // offered records/s; 0 = as fast as the path takes them
	DropPct  float64       // percent lost at each receiving socket (data at the receiver, NAKs at the sender)
	SendFor  time.Duration // producing time
	DrainFor time.Duration // extra time for repairs after the last record
	WAL      bool          // the producer logs to a WAL (cold reads from it)
	// Consumer catches up over TCP (TLS) from the producer's WAL when UDP
	// cannot repair a gap; off, the consumer repairs over UDP only. Needs
	// WAL.
	Consumer   bool
	Dir        string // where the WAL lives
	CPUA, CPUB int
	// Net, when set, carries the stream (Path "udp" only) across the loss
	// link, whose BPF injector does the dropping: DropPct is then only
	// the figure the row reports and no datapath/drop is stacked on top.
	Net *lossNet
	// OneWay stamps each record with its send time (the producer's loop
	// iteration that sent it) and records send → delivery at the consumer
	// (one clock: both are in this process), TCP catch-up included.
	OneWay bool
}

type castOutcome struct {
	produced, delivered int64
	inOrder             bool
	first, last         time.Time
	s                   protocol.SenderStats
	r                   protocol.ReceiverStats
	events              []string
	udp, tcp            uint64 // consumer: records delivered over UDP and by TCP catch-up
	escalations         uint64
	oneway              *harness.Hist // send → delivery, with castStream.OneWay
}

// run streams with a cast.Producer (WAL, sender, pinned loop producing
// from inside its loop) to a cast.Consumer (receiver on its pinned loop,
// TCP catch-up from the producer's replay server with Consumer).
func (o castStream) run() (castOutcome, error) {
	var out castOutcome
	if o.Consumer && !o.WAL {
		return out, fmt.Errorf("suite: the consumer needs the WAL")
	}
	var pa, pb datapath.Path
	var err error
	if o.Net != nil {
		if o.Path != "udp" {
			return out, fmt.Errorf("suite: the loss link carries udp paths only, not %q", o.Path)
		}
		pa, pb, err = o.Net.udpPaths()
	} else {
		pa, pb, err = castPaths(o.Path)
	}
	if err != nil {
		return out, err
	}
	var sp, rp = pa, pb
	if o.DropPct > 0 && o.Net == nil {
		sp = drop.New(pa, drop.Config{RecvPct: o.DropPct, Seed: 1}, 64, protocol.DefaultMaxFrame)
		rp = drop.New(pb, drop.Config{RecvPct: o.DropPct, Seed: 2}, 64, protocol.DefaultMaxFrame)
	}
	pc := cast.ProducerConfig{Path: sp, Thread: affinity.OnCPU(o.CPUA), Advanced: cast.ProducerAdvanced{RaiseGOMAXPROCS: true}}
	cc := cast.ConsumerConfig{Path: rp, Thread: affinity.OnCPU(o.CPUB), NoCatchUp: !o.Consumer, Advanced: cast.ConsumerAdvanced{RaiseGOMAXPROCS: true}}
	if o.WAL {
		if pc.Dir, err = os.MkdirTemp(o.Dir, "cast-wal-"); err != nil {
			return out, err
		}
		defer os.RemoveAll(pc.Dir)
	}
	if o.Consumer {
		pki, err := replay.NewDevPKI(nil, time.Hour)
		if err != nil {
			return out, err
		}
		if pc.TLS, err = pki.ServerTLS(true); err != nil {
			return out, err
		}
		if cc.TLS, err = pki.ClientTLS(); err != nil {
			return out, err
		}
		cc.TLS.ServerName = "localhost"
		pc.ReplayAddr = "127.0.0.1:0"
		cc.Advanced.ReplayClient.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
		cc.Advanced.ReplayClient.RetryBudget = 100
	}

	payload := make([]byte, max(o.Payload, 24))
	var produced atomic.Int64
	var sending atomic.Bool
	base := time.Now()
	// A token bucket, not a schedule: after a stall (a closed window, WAL
	// backpressure, a descheduled loop) the producer resumes at the rate
	// instead of racing to catch up.
	bucket := pace.New(o.Rate)
	pc.Advanced.OnPoll = func(l *cast.Loop, now int64) {
		if !sending.Load() {
			return
		}
		if o.OneWay {
			binary.LittleEndian.PutUint64(payload[16:], uint64(time.Since(base)))
		}
		n := produced.Load()
		for k := 0; k < 64 && bucket.Ready(now); k++ {
			binary.LittleEndian.PutUint64(payload[8:], uint64(n))
			if _, err := l.Send(1, payload); err != nil {
				break // batch full or WAL backpressure: next iteration
			}
			bucket.Spend()
			n++
		}
		produced.Store(n)
	}
	pr, err := cast.NewProducer(pc)
	if err != nil {
		rp.Close()
		return out, err
	}
	if o.Consumer {
		cc.Replay = []string{pr.ReplayAddr().String()}
	}

	var delivered atomic.Int64
	var lastNS atomic.Int64
	if o.OneWay {
		out.oneway = harness.NewHist()
	}
	inOrder := true
	var prev uint64
	var evMu sync.Mutex
	live := make(chan struct{}, 1)
	cc.OnEvent = func(e cast.Event) {
		evMu.Lock()
		out.events = append(out.events, fmt.Sprintf("%v %v rec=%d in %v", e.Kind, e.Outcome.Kind, e.Records, e.Duration.Round(time.Millisecond)))
		evMu.Unlock()
		if e.Kind == cast.EventLive {
			select {
			case live <- struct{}{}:
			default:
			}
		}
	}
	cons, err := cast.NewConsumer(cc)
	if err != nil {
		pr.Close()
		rp.Close()
		return out, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cons.Run(ctx, func(r cast.Record) error {
			if prev != 0 && r.Seq != prev+1 {
				inOrder = false
			}
			prev = r.Seq
			delivered.Add(1)
			now := int64(time.Since(base))
			lastNS.Store(now)
			if out.oneway != nil && len(r.Payload) >= 24 {
				out.oneway.Record(now - int64(binary.LittleEndian.Uint64(r.Payload[16:])))
			}
			return nil
		})
	}()
	var runErr error
	select { // live: bootstrapped, or straight away without catch-up
	case <-live:
	case runErr = <-done:
	case <-time.After(10 * time.Second):
		runErr = fmt.Errorf("consumer not live within 10 s")
	}
	if runErr != nil {
		cancel()
		pr.Close()
		return out, fmt.Errorf("consumer: %w", runErr)
	}

	out.first = time.Now()
	sending.Store(true)
	time.Sleep(o.SendFor)
	sending.Store(false)
	serr, runErr := stopPair(pr, cancel, done, time.Now().Add(o.DrainFor), 2*time.Millisecond,
		func() bool { return delivered.Load() < produced.Load() })
	out.produced, out.delivered, out.inOrder = produced.Load(), delivered.Load(), inOrder
	out.last = base.Add(time.Duration(lastNS.Load()))
	out.s = pr.Stats().Sender
	cs := cons.Stats()
	out.r = cs.Receiver
	out.udp, out.tcp, out.escalations = cs.UDPRecords, cs.TCPRecords, cs.Escalations
	if serr != nil {
		out.events = append(out.events, "producer: "+serr.Error())
	}
	if runErr != nil {
		out.events = append(out.events, "consumer: "+runErr.Error())
	}
	return out, nil
}

// stopPair ends a producer → consumer run: it waits while more() holds,
// until deadline, until the consumer's Run returns on done or the
// producer faults (polling every poll); then closes the producer (which
// drains it), cancels the consumer and returns both errors, a cancelled
// consumer's context.Canceled as nil.
func stopPair(pr *cast.Producer, cancel context.CancelFunc, done <-chan error, deadline time.Time, poll time.Duration, more func() bool) (prodErr, consErr error) {
	stopped := false
	for !stopped && more() && time.Now().Before(deadline) && pr.Err() == nil {
		select {
		case consErr = <-done:
			stopped = true
		case <-time.After(poll):
		}
	}
	prodErr = pr.Close()
	cancel()
	if !stopped {
		consErr = <-done
	}
	if errors.Is(consErr, context.Canceled) {
		consErr = nil
	}
	return prodErr, consErr
}

// fill sets res's counts, delivered share, rate (frames of size bytes)
// and retransmits from the run's outcome.
func (out castOutcome) fill(res *harness.Result, size int) {
	res.Sent, res.Delivered, res.Records = out.produced, out.delivered, out.delivered
	if out.produced > 0 {
		res.DeliveredPct = 100 * float64(out.delivered) / float64(out.produced)
	}
	if el := out.last.Sub(out.first); out.delivered > 0 && el > 0 {
		res.Seconds = el.Seconds()
		res.RecPerS = float64(out.delivered) / el.Seconds()
		res.Gbps = res.RecPerS * float64(size) * 8 / 1e9
	}
	res.Retransmits(int64(out.s.RetxHot + out.s.RetxCold))
	if out.oneway != nil && out.delivered > 0 {
		res.Latency, res.Curve = out.oneway.Summary(), out.oneway.Curve()
	}
	if n := out.udp + out.tcp; n > 0 {
		udp := 100 * float64(out.udp) / float64(n)
		res.OverUDPPct = &udp
	}
}

// castingLossRow runs casting (WAL on, udp path) at drop% both ways:
// across ln (its BPF injector already set to drop) or, without it, with
// datapath/drop at each receiving socket.
func castingLossRow(o Options, ln *lossNet, name string, drop float64, rate float64) harness.Result {
	cs := castStream{Path: "udp", Payload: 128, Rate: rate, DropPct: drop * 100, SendFor: o.LossTime, DrainFor: lossDrain(o),
		WAL: true, Consumer: true, Dir: o.Dir, CPUA: o.Harness.ClientCPU, CPUB: o.Harness.ServerCPU, OneWay: true, Net: ln}
	res := harness.Result{Row: benchkit.Row{Workload: "loss-degradation", Name: name, Path: "udp", Mode: "spin"}, Size: 144, Drop: drop, Pinned: true}
	out, err := cs.run()
	if err != nil {
		res.Skipped, res.Note = err.Error(), "failed: "+err.Error()
		return res
	}
	out.fill(&res, 144)
	note := fmt.Sprintf("retx hot %d cold %d, NAKs %d; delivered %d over UDP, %d by TCP catch-up after %d escalations", out.s.RetxHot, out.s.RetxCold, out.r.NaksSent, out.udp, out.tcp, out.escalations)
	if rate > 0 {
		note = fmt.Sprintf("offered %.0f rec/s; ", rate) + note
	} else {
		note = "unpaced; " + note
	}
	if !out.inOrder {
		note += "; OUT OF ORDER"
	}
	if n := len(out.events); n > 4 {
		note += fmt.Sprintf("; %d events, first: %v", n, out.events[:4])
	} else if n > 0 {
		note += fmt.Sprintf("; events: %v", out.events)
	}
	res.Note = note
	return res
}

// castingTput runs casting unpaced over path for o.Harness.Budget and
// reports what the receiver delivered in order.
func castingTput(o Options, workload, name, path string, payload int, withWAL bool) harness.Result {
	cs := castStream{Path: path, Payload: payload, SendFor: min(o.Harness.Budget, 2*time.Second), DrainFor: 2 * time.Second,
		WAL: withWAL, Consumer: withWAL, Dir: o.Dir, CPUA: o.Harness.ClientCPU, CPUB: o.Harness.ServerCPU}
	size := payload + wire.HeaderSize
	res := harness.Result{Row: benchkit.Row{Workload: workload, Name: name, Path: path, Mode: "spin"}, Size: size, Pinned: true}
	out, err := cs.run()
	if err != nil {
		res.Skipped, res.Note = err.Error(), "failed: "+err.Error()
		return res
	}
	out.fill(&res, size)
	w := "WAL off, UDP repairs only"
	if withWAL {
		w = fmt.Sprintf("WAL on, Consumer: %d over UDP, %d by TCP catch-up after %d escalations", out.udp, out.tcp, out.escalations)
	}
	res.Note = fmt.Sprintf("%s, %d-byte frames, %.0f Mbit/s; retx hot %d cold %d", w, size, res.Gbps*1000, out.s.RetxHot, out.s.RetxCold)
	if !out.inOrder {
		res.Note += "; OUT OF ORDER"
	}
	if len(out.events) > 0 {
		res.Note += fmt.Sprintf("; events %v", out.events[:min(len(out.events), 3)])
	}
	return res
}

// castingPing is ping-pong over casting: the client loop (Sender and
// Receiver on one datapath, core A) sends one record and waits for the
// echo loop (Sender and Receiver on the other, core B) to send one back;
// the RTT is taken on the client's loop thread. dropPct is lost at the
// echo's socket (the classic receiver-side drop: data in and NAKs in).
// No WAL: retransmits come from the hot ring.
func castingPing(o Options, workload string, cfg harness.Config, dropPct float64) harness.Result {
	res := harness.Result{Row: benchkit.Row{Workload: workload, Name: "casting-udp", Path: "udp", Mode: "spin"}, Size: cfg.Payload, Drop: dropPct / 100, Pinned: true}
	fail := func(err error) harness.Result {
		res.Skipped, res.Note = err.Error(), "failed: "+err.Error()
		return res
	}
	pa, pb, err := castPaths("udp")
	if err != nil {
		return fail(err)
	}
	var ep = pb
	if dropPct > 0 {
		ep = drop.New(pb, drop.Config{RecvPct: dropPct, Seed: 3}, 64, protocol.DefaultMaxFrame)
	}
	mk := func() (*protocol.Sender, *protocol.Receiver, error) {
		s, err := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
		if err != nil {
			return nil, nil, err
		}
		r, err := protocol.NewReceiver(protocol.DefaultReceiverConfig())
		return s, r, err
	}
	// Echo: every record received is sent back from the next poll.
	es, er, err := mk()
	if err != nil {
		pa.Close()
		ep.Close()
		return fail(err)
	}
	echoBuf := make([]byte, cfg.Payload)
	var echoPending bool
	el := cast.DefaultLoopConfig()
	el.Path, el.Sender, el.Receiver = ep, es, er
	el.RaiseGOMAXPROCS = true
	el.Thread = affinity.OnCPU(cfg.ServerCPU)
	el.OnRecord = func(_ *cast.Loop, h wire.Header, p []byte) {
		copy(echoBuf, p)
		echoPending = true
	}
	el.OnPoll = func(l *cast.Loop, now int64) {
		if echoPending {
			if _, err := l.Send(1, echoBuf); err == nil {
				echoPending = false
			}
		}
	}
	eloop, err := cast.StartLoop(el)
	if err != nil {
		pa.Close()
		return fail(err)
	}
	cs, cr, err := mk()
	if err != nil {
		eloop.Close()
		pa.Close()
		return fail(err)
	}
	h := harness.NewHist()
	series := make([]int64, 0, cfg.N)
	msg := make([]byte, cfg.Payload)
	var inflight bool
	var t0, start time.Time
	var count, measured int
	var finished atomic.Bool
	total := cfg.Warmup + cfg.N
	cl := cast.DefaultLoopConfig()
	cl.Path, cl.Sender, cl.Receiver = pa, cs, cr
	cl.RaiseGOMAXPROCS = true
	cl.Thread = affinity.OnCPU(cfg.ClientCPU)
	cl.OnPoll = func(l *cast.Loop, now int64) {
		if inflight || finished.Load() {
			return
		}
		if count >= total || (count > cfg.Warmup && time.Since(start) > cfg.Budget) {
			finished.Store(true)
			return
		}
		if count == cfg.Warmup {
			start = time.Now()
		}
		binary.LittleEndian.PutUint64(msg[8:], uint64(count))
		t0 = time.Now()
		if _, err := l.Send(1, msg); err == nil {
			inflight = true
		}
	}
	cl.OnRecord = func(_ *cast.Loop, hd wire.Header, p []byte) {
		if !inflight || binary.LittleEndian.Uint64(p[8:]) != uint64(count) {
			return
		}
		dt := time.Since(t0).Nanoseconds()
		if count >= cfg.Warmup {
			h.Record(dt)
			series = append(series, dt)
			measured++
		}
		count++
		inflight = false
	}
	cloop, err := cast.StartLoop(cl)
	if err != nil {
		eloop.Close()
		return fail(err)
	}
	deadline := time.Now().Add(cfg.Timeout)
	for !finished.Load() && time.Now().Before(deadline) && cloop.Err() == nil && eloop.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if !finished.Load() {
		res.Note = "stopped by the watchdog"
	}
	cerr, eerr := cloop.Close(), eloop.Close()
	if cerr != nil || eerr != nil {
		res.Note = strings.TrimSpace(fmt.Sprintf("%s loops: %v / %v", res.Note, cerr, eerr))
	}
	st := cloop.SenderStats()
	est := eloop.SenderStats()
	res.Latency, res.Curve, res.Series = h.Summary(), h.Curve(), series
	res.Records, res.Sent, res.Delivered = int64(measured), int64(measured), int64(measured)
	res.DeliveredPct = 100
	if !start.IsZero() {
		res.Seconds = time.Since(start).Seconds()
	}
	res.Retransmits(int64(st.RetxHot + st.RetxCold + est.RetxHot + est.RetxCold))
	res.Note = strings.TrimSpace(res.Note + fmt.Sprintf(" retx %d (client) + %d (echo), heartbeats %d+%d", st.RetxHot+st.RetxCold, est.RetxHot+est.RetxCold, st.Heartbeats, est.Heartbeats))
	return res
}
