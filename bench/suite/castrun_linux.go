package suite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
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
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
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
		pb, err := udp.New(udp.DefaultConfig())
		if err != nil {
			return nil, nil, err
		}
		c := udp.DefaultConfig()
		c.Peer = pb.LocalAddr()
		pa, err := udp.New(c)
		if err != nil {
			pb.Close()
			return nil, nil, err
		}
		local := pb.LocalAddr()
		pb.Close() // reopen connected back to a
		cb := udp.DefaultConfig()
		cb.Local, cb.Peer = local, pa.LocalAddr()
		if pb, err = udp.New(cb); err != nil {
			pa.Close()
			return nil, nil, err
		}
		return pa, pb, nil
	case "mmsg":
		pb, err := mmsg.New(mmsg.DefaultConfig())
		if err != nil {
			return nil, nil, err
		}
		c := mmsg.DefaultConfig()
		c.Peer = pb.LocalAddr()
		pa, err := mmsg.New(c)
		if err != nil {
			pb.Close()
			return nil, nil, err
		}
		local := pb.LocalAddr()
		pb.Close()
		cb := mmsg.DefaultConfig()
		cb.Local, cb.Peer = local, pa.LocalAddr()
		if pb, err = mmsg.New(cb); err != nil {
			pa.Close()
			return nil, nil, err
		}
		return pa, pb, nil
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
	WAL      bool          // sender logs to a wal.Writer (cold reads from it)
	// Consumer receives with cast.Consumer (UDP receiver plus TCP
	// catch-up from the sender's WAL through a replay.Server over TLS)
	// instead of a bare Receiver loop; needs WAL.
	Consumer   bool
	Dir        string // where the WAL lives
	CPUA, CPUB int
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
}

func (o castStream) run() (castOutcome, error) {
	var out castOutcome
	pa, pb, err := castPaths(o.Path)
	if err != nil {
		return out, err
	}
	var sp, rp = pa, pb
	if o.DropPct > 0 {
		sp = drop.New(pa, drop.Config{RecvPct: o.DropPct, Seed: 1}, 64, protocol.DefaultMaxFrame)
		rp = drop.New(pb, drop.Config{RecvPct: o.DropPct, Seed: 2}, 64, protocol.DefaultMaxFrame)
	}
	var log protocol.Log
	var cold cast.ColdReader
	var w *wal.Writer
	var walDir string
	if o.WAL {
		walDir, err = os.MkdirTemp(o.Dir, "cast-wal-")
		if err != nil {
			return out, err
		}
		defer os.RemoveAll(walDir)
		wc := wal.DefaultConfig(walDir)
		wc.BlockOnBackpressure = false
		if w, err = wal.Open(wc); err != nil {
			return out, err
		}
		defer w.Close()
		log, cold = w, w
	}
	snd, err := protocol.NewSender(protocol.DefaultSenderConfig(), log)
	if err != nil {
		return out, err
	}
	rcv, err := protocol.NewReceiver(protocol.DefaultReceiverConfig())
	if err != nil {
		return out, err
	}
	var delivered atomic.Int64
	var lastNS atomic.Int64
	base := time.Now()
	inOrder := true
	var prev uint64
	var evMu sync.Mutex
	onRecord := func(h wal.Header, p []byte) {
		s := wal.Seq(p)
		if prev != 0 && s != prev+1 {
			inOrder = false
		}
		prev = s
		delivered.Add(1)
		lastNS.Store(int64(time.Since(base)))
	}
	var rloop *cast.Loop
	var consumer *cast.Consumer
	var stopConsumer func() error
	if o.Consumer {
		if !o.WAL {
			return out, fmt.Errorf("suite: the consumer needs the WAL")
		}
		consumer, stopConsumer, err = startConsumer(o, rp, w, walDir, onRecord, func(s string) {
			evMu.Lock()
			out.events = append(out.events, s)
			evMu.Unlock()
		})
		if err != nil {
			sp.Close()
			return out, err
		}
	} else {
		rl := cast.DefaultLoopConfig()
		rl.Path, rl.Receiver = rp, rcv
		rl.Thread = affinity.OnCPU(o.CPUB)
		rl.OnRecord = func(_ *cast.Loop, h wal.Header, p []byte) { onRecord(h, p) }
		rl.OnEvent = func(e cast.Event) {
			evMu.Lock()
			out.events = append(out.events, fmt.Sprintf("%v %v", e.Kind, e.Outcome.Kind))
			evMu.Unlock()
		}
		if rloop, err = cast.StartLoop(rl); err != nil {
			sp.Close()
			return out, err
		}
	}
	recvErr := func() error {
		if rloop != nil {
			return rloop.Err()
		}
		return nil
	}
	closeRecv := func() error {
		if rloop != nil {
			return rloop.Close()
		}
		return stopConsumer()
	}
	payload := make([]byte, max(o.Payload, 16))
	var produced atomic.Int64
	var stopSending atomic.Bool
	var startNS int64
	sl := cast.DefaultLoopConfig()
	sl.Path, sl.Sender, sl.Cold = sp, snd, cold
	sl.Thread = affinity.OnCPU(o.CPUA)
	sl.OnPoll = func(l *cast.Loop, now int64) {
		if stopSending.Load() {
			return
		}
		if startNS == 0 {
			startNS = now
		}
		n := produced.Load()
		for k := 0; k < 64; k++ {
			if o.Rate > 0 && float64(n) > float64(now-startNS)/1e9*o.Rate {
				break
			}
			binary.LittleEndian.PutUint64(payload[8:], uint64(n))
			if _, err := l.Send(1, payload); err != nil {
				break // batch full or WAL backpressure: next iteration
			}
			n++
		}
		produced.Store(n)
	}
	out.first = time.Now()
	sloop, err := cast.StartLoop(sl)
	if err != nil {
		closeRecv()
		return out, err
	}
	time.Sleep(o.SendFor)
	stopSending.Store(true)
	end := time.Now().Add(o.DrainFor)
	for time.Now().Before(end) && delivered.Load() < produced.Load() && recvErr() == nil && sloop.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	serr, rerr := sloop.Close(), closeRecv()
	out.produced, out.delivered, out.inOrder = produced.Load(), delivered.Load(), inOrder
	out.last = base.Add(time.Duration(lastNS.Load()))
	out.s = sloop.SenderStats()
	if rloop != nil {
		out.r = rloop.ReceiverStats()
	} else {
		cs := consumer.Stats()
		out.r = cs.Receiver
		out.udp, out.tcp, out.escalations = cs.UDPRecords, cs.TCPRecords, cs.Escalations
	}
	if serr != nil {
		out.events = append(out.events, "sender loop: "+serr.Error())
	}
	if rerr != nil {
		out.events = append(out.events, "receiver loop: "+rerr.Error())
	}
	return out, nil
}

// castingLossRow runs casting (WAL on, udp path) at drop% both ways.
func castingLossRow(o Options, name string, drop float64, rate float64) harness.Result {
	cs := castStream{Path: "udp", Payload: 128, Rate: rate, DropPct: drop * 100, SendFor: o.LossTime, DrainFor: lossDrain(o),
		WAL: true, Consumer: true, Dir: o.Dir, CPUA: o.Harness.ClientCPU, CPUB: o.Harness.ServerCPU}
	res := harness.Result{Row: benchkit.Row{Workload: "loss-degradation", Name: name, Path: "udp", Mode: "spin"}, Size: 144, Drop: drop, Pinned: true}
	out, err := cs.run()
	if err != nil {
		res.Skipped, res.Note = err.Error(), "failed: "+err.Error()
		return res
	}
	res.Sent, res.Delivered, res.Records = out.produced, out.delivered, out.delivered
	if out.produced > 0 {
		res.DeliveredPct = 100 * float64(out.delivered) / float64(out.produced)
	}
	if el := out.last.Sub(out.first); out.delivered > 0 && el > 0 {
		res.Seconds = el.Seconds()
		res.RecPerS = float64(out.delivered) / el.Seconds()
		res.Gbps = res.RecPerS * 144 * 8 / 1e9
	}
	res.Retransmits(int64(out.s.RetxHot + out.s.RetxCold))
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

// startConsumer serves w over TLS with a replay.Server and runs a
// cast.Consumer on path (pinned to o.CPUB), bootstrapped before it
// returns. stop cancels it and closes the server.
func startConsumer(o castStream, path datapath.Path, w *wal.Writer, dir string, deliver func(wal.Header, []byte), event func(string)) (*cast.Consumer, func() error, error) {
	pki, err := replay.NewDevPKI(nil, time.Hour)
	if err != nil {
		return nil, nil, err
	}
	stls, err := pki.ServerTLS(false)
	if err != nil {
		return nil, nil, err
	}
	ctls, err := pki.ClientTLS()
	if err != nil {
		return nil, nil, err
	}
	sc := replay.DefaultServerConfig()
	sc.TLS = stls
	srv, err := replay.NewServer(sc, replay.NewWriterSource(w, dir, 0))
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	go srv.Serve(ln)
	resumed := make(chan struct{}, 1)
	ctls.ServerName = "localhost"
	cfg := cast.ConsumerConfig{Path: path, Replay: []string{ln.Addr().String()}, TLS: ctls, Thread: affinity.OnCPU(o.CPUB)}
	cfg.ReplayClient.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	cfg.ReplayClient.RetryBudget = 100
	cfg.OnEvent = func(e cast.ConsumerEvent) {
		event(fmt.Sprintf("%v %v rec=%d in %v", e.Kind, e.Outcome.Kind, e.Records, e.Duration.Round(time.Millisecond)))
		if e.Kind == cast.EventLive {
			select {
			case resumed <- struct{}{}:
			default:
			}
		}
	}
	c, err := cast.NewConsumer(cfg)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, func(r cast.Record) error { deliver(wal.Header{Type: r.Type, CRC: r.CRC}, r.Payload); return nil })
	}()
	select {
	case <-resumed:
	case err := <-done:
		cancel()
		srv.Close()
		return nil, nil, fmt.Errorf("consumer bootstrap: %w", err)
	case <-time.After(10 * time.Second):
		cancel()
		srv.Close()
		return nil, nil, fmt.Errorf("consumer bootstrap: no resume within 10 s")
	}
	stop := func() error {
		cancel()
		err := <-done
		srv.Close()
		path.Close()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return err
	}
	return c, stop, nil
}

// castingTput runs casting unpaced over path for o.Harness.Budget and
// reports what the receiver delivered in order.
func castingTput(o Options, workload, name, path string, payload int, withWAL bool) harness.Result {
	cs := castStream{Path: path, Payload: payload, SendFor: min(o.Harness.Budget, 2*time.Second), DrainFor: 2 * time.Second,
		WAL: withWAL, Consumer: withWAL, Dir: o.Dir, CPUA: o.Harness.ClientCPU, CPUB: o.Harness.ServerCPU}
	size := payload + wal.HeaderSize
	res := harness.Result{Row: benchkit.Row{Workload: workload, Name: name, Path: path, Mode: "spin"}, Size: size, Pinned: true}
	out, err := cs.run()
	if err != nil {
		res.Skipped, res.Note = err.Error(), "failed: "+err.Error()
		return res
	}
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
	w := "WAL off, bare Receiver loop"
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
	el.Thread = affinity.OnCPU(cfg.ServerCPU)
	el.OnRecord = func(_ *cast.Loop, h wal.Header, p []byte) {
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
	cl.OnRecord = func(_ *cast.Loop, hd wal.Header, p []byte) {
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
